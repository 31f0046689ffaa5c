"""``testcurator accept``: write the changes a night kept back for review.

A night whose standing configs regressed keeps their entries as they stand and records what
regeneration proposed instead (``emit.json`` ``pending`` in the run folder: the demotion or
new exclusion, with its reason). Accepting writes those proposals into the configs through
the same emit path a run uses (pipelines/emit.py), so they stay the pipeline's entries (a
later night that sees the test pass again promotes it) and human edits still win. Each
accepted entry's reason says it was accepted and from which run.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path

from testcurator.agents.decision import Decision, from_dict
from testcurator.config.profile import load_profile
from testcurator.errors import BadInputError
from testcurator.pipelines import emit as emitter
from testcurator.pipelines.store import RunStore
from testcurator.vocab import TestKey


def run_of(state_dir: Path, out_dir: Path) -> Path:
    """The newest run folder that wrote ``out_dir`` (bad input when there is none)."""
    runs = sorted((p for p in (state_dir / "runs").glob("*/run.json")), key=lambda p: p.stat().st_mtime, reverse=True)
    for record in runs:
        data = json.loads(record.read_text(encoding="utf-8"))
        if Path(data.get("out_dir", "")).resolve() == out_dir.resolve():
            return record.parent
    raise BadInputError(f"no run of {out_dir} is recorded under {state_dir / 'runs'}: run `testcurator run --out "
                        f"{out_dir}` first (or give the --state-dir it used)")


def accept(run_dir: Path, tests: Collection[str] = ()) -> emitter.EmitResult:
    """Write the pending changes of ``run_dir`` (those of ``tests``, ``file::Class::test``,
    when given) into the configs that run wrote: the config files written, and the tests a
    person had edited since (their edits stand)."""
    store = RunStore(run_dir)
    record = store.read_json("run.json") or {}
    pending = (store.read_json("emit.json") or {}).get("pending") or []
    wanted = set(tests)
    unknown = wanted - {f"{p['file']}::{p['test']}" for p in pending}
    if unknown:
        raise BadInputError(f"not kept back for review in run {run_dir.name}: {', '.join(sorted(unknown))} (pending: "
                            + (", ".join(f"{p['file']}::{p['test']}" for p in pending) or "none") + ")")
    chosen = [p for p in pending if not wanted or f"{p['file']}::{p['test']}" in wanted]
    by_file: dict[str, list[Decision]] = defaultdict(list)
    for p in chosen:
        decision = from_dict(Decision, p["decision"])
        by_file[p["file"]].append(replace(decision, reason=f"{decision.reason} Accepted by a person from run "
                                          f"{run_dir.name} (`testcurator accept`)."))
    configs, root = Path(record["out_dir"]) / "configs", Path(record["torch_root"])
    profile, _ = load_profile(Path(record["profile"]))
    sidecar, result = emitter.load_sidecar(configs), emitter.EmitResult()
    for rel, decisions in sorted(by_file.items()):
        emitter.emit_file(configs, root, profile, rel, decisions, sidecar, set(), result, drop_stale=False)
    emitter.save_sidecar(configs, sidecar)
    store.write_json("accepted.json", sorted(str(TestKey.of(p["file"], p["test"])) for p in chosen))
    return result
