"""``enable-op --execute``: run only the admitted tests on the device, bucket by result.

The admitted tests run from a config of their own (each as ``mandatory_success`` with its
admitted edits, every other test unlisted and so skipped), through the same runner as the
pipeline's draft. Then, per admission: its variants all passed -> it stays admitted; a
variant of it failed -> ``xfail_strict`` (or, for an ``@ops`` entry, OP goes back into its
exclusions), the reason naming the failure class and its evidence line.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from testcurator.agents.brain import ExecutionRecord
from testcurator.agents.refine import group_records
from testcurator.config.editor import ConfigEditor, EntrySpec
from testcurator.config.profile import BackendProfile, load_profile
from testcurator.errors import BadInputError, ExecutionError
from testcurator.pipelines import emit as emitter
from testcurator.pipelines.context import Say
from testcurator.pipelines.enable_op.admission import Admission, EnableOptions, EnableResult
from testcurator.runner.command import RunSpec, build_env
from testcurator.runner.preflight import check_backend
from testcurator.runner.verdict import verdict as run_verdict
from testcurator.runner.execute import execute
from testcurator.runner.results.records import read_jsonl
from testcurator.vocab import TestKey, op_key



def _exec_config(folder: Path, profile: BackendProfile, admitted: Sequence[Admission], op: str) -> Path:
    caps = emitter.capabilities(profile) or {}
    if "supported_ops" in caps and op_key(op) not in {o["name"] for o in caps["supported_ops"]}:
        caps["supported_ops"] = caps["supported_ops"] + [{"name": op_key(op)}]
    by_raw: dict[str, list[EntrySpec]] = defaultdict(list)
    for adm in admitted:
        spec = adm.spec or adm.original
        if spec is not None:
            by_raw[adm.raw_path].append(EntrySpec((TestKey.parse(adm.key).name,), "mandatory_success", None, spec.edits))
    editor = ConfigEditor.new(folder / "admitted.yaml", global_=caps or None)
    for raw, specs in sorted(by_raw.items()):
        editor.update(raw, specs, unlisted_test_mode="skip")
    editor.save()
    return folder / "admitted.yaml"


def _verdict(adm: Admission, records: Sequence[ExecutionRecord], op: str) -> tuple[str, ExecutionRecord | None]:
    relevant = [r for r in records if adm.kind == "mode" or r.op == op_key(op)]
    ran = [r for r in relevant if any(o != "skipped" for o in r.outcomes)]
    if not ran:
        return "not run", None
    failed = next((r for r in ran if not any(o == "passed" for o in r.outcomes)), None)
    return ("passed", None) if failed is None else (f"failed: {failed.failure_class or 'failed'}", failed)


def _demoted(adm: Admission, rec: ExecutionRecord, op: str) -> EntrySpec:
    evidence = f"{rec.failure_class or 'failure'} (`{(rec.message or '').strip()[:160]}`)"
    note = f"enable-op {op}: admitted, but {TestKey.parse(rec.variant).test} failed on the device with {evidence}"
    if adm.kind == "mode" and adm.spec is not None:
        return EntrySpec(adm.spec.names, "xfail_strict", f"{note}, so an unexpected pass will signal promotion. "
                         f"Before: {adm.original.reason if adm.original else ''}", adm.spec.edits)
    base = adm.original if adm.original is not None else adm.spec
    assert base is not None
    edits: dict[str, Any] = dict(base.edits or {})
    excluded = [o for o in (edits.get("ops") or {}).get("exclude", []) if o["name"] != op_key(op)]
    edits["ops"] = {"exclude": sorted(excluded + [{"name": op_key(op)}], key=lambda o: o["name"])}
    return EntrySpec(base.names, base.mode, f"{note}; its {op_key(op)} variants stay excluded. "
                     f"Before: {base.reason or ''}", edits)


def run_admitted(opts: EnableOptions, root: Path, result: EnableResult, say: Say) -> None:
    """Run ``result.admitted`` on the device; demote what fails; record verdicts in ``result``."""
    if opts.backend is None:
        raise BadInputError("enable-op --execute needs --backend backend.yaml (the device and how to load it)")
    profile, _ = load_profile(opts.backend)
    folder = opts.state_dir / "enable-op" / f"{op_key(opts.op).replace('/', '_')}-{time.strftime('%Y%m%d-%H%M%S')}"
    folder.mkdir(parents=True, exist_ok=True)
    config = _exec_config(folder, profile, result.admitted, opts.op)
    spec = RunSpec(out_dir=folder / "exec", config=config, torch_root=root, device=profile.device.torch_name,
                   backend=profile.backend_module, timeout=opts.timeout, retries=1,
                   env=tuple(sorted(profile.test_env(opts.backend.resolve()).items())), unrelated_plugins_off=True)
    if spec.backend:
        check_backend(spec.backend, env=build_env(spec), cwd=spec.cwd, where=f"{opts.backend}: backend_module")
    run = execute(spec)
    outcome = run_verdict(run.records)
    if outcome.infrastructure or not outcome.tests:
        # Admissions are kept or demoted by what ran: nothing ran, so nothing can be decided.
        raise ExecutionError("enable-op --execute: the run on the device failed:\n"
                             + "\n".join(outcome.lines(str(folder / "exec" / "results.jsonl"))))
    executions = group_records(read_jsonl(folder / "exec" / "results.jsonl"), root)
    demote: dict[tuple[str, str], list[EntrySpec]] = defaultdict(list)
    for adm in result.admitted:
        verdict, failed = _verdict(adm, executions.get(TestKey.parse(adm.key), []), opts.op)
        result.executed[adm.key] = verdict
        if failed is not None:
            demote[(adm.yaml, adm.raw_path)].append(_demoted(adm, failed, opts.op))
    for (yaml, raw), specs in sorted(demote.items()):
        editor = ConfigEditor.open(Path(yaml))
        editor.update(raw, specs, unlisted_test_mode="skip")
        editor.save()
    say("on the device: " + ", ".join(f"{k} {v}" for k, v in sorted(result.executed.items())))
