"""``testcurator upgrade``: move a curated config from one upstream tree to the next.

    old config ──copy──► out/configs ──moves, removals──► ──delta run (stages 3-4)──► out/configs
    old tree ─┐                                              ▲
    new tree ─┴─ memory of each (content hash per test) ─► delta: changed + added tests only

The delta run is the nightly graph with ``RunContext.only_tests`` set: bucket, the draft
execution, refine and emit see the changed and added tests and nothing else, so every other
decision and every human edit stays byte for byte as it was. The report says how many tests
were evaluated out of how many, and lists what was moved and what was removed.

Files that do not import are decided as a whole, as in a full run: the delta run's capture
(or static collection) also collects every kept file whose source changed, and one that
stopped importing gets the file-level skip (its pipeline entries go); a file the old configs
skipped that way has all its tests evaluated, and once it imports they are bucketed like
any other. The report lists both.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testcurator.agents.brain import BrainContext
from testcurator.agents.decision import FileDecision
from testcurator.agents.scope import kept_files, scope_tree
from testcurator.config.loader import load_config
from testcurator.errors import MissingPathError
from testcurator.files import atomic_write_text
from testcurator.memory.api import Memory
from testcurator.memory.builder import build
from testcurator.memory.collect import Decorator
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.emit import file_decisions
from testcurator.pipelines.upgrade.modes import ModeLookup, mode_changes, mode_line, wrap
from testcurator.pipelines.nightly.run import run_nightly
from testcurator.pipelines.decide import not_importing
from testcurator.pipelines.store import RunStore
from testcurator.pipelines.upgrade.config import CarryResult, carry_over, copy_configs
from testcurator.pipelines.upgrade.delta import TestDelta, classify
from testcurator.runner.command import reference_env
from testcurator.runner.warm import WarmPytest, torch_test_modules
from testcurator.vocab import TestKey


@dataclass(frozen=True)
class UpgradeOptions:
    old_root: Path
    config: Path  # the old tree's configs directory
    run: RunContext  # the new tree, backend, output folder, state dir and run settings


# Where a PyTorch source tree keeps op_db: an ``@ops`` test instantiates what these say.
OPINFO_SOURCES = ("torch/testing/_internal/common_methods_invocations.py", "torch/testing/_internal/opinfo")


def opinfo_digest(root: Path) -> str | None:
    """A hash of the tree's own OpInfo database, or None when the tree does not carry one
    (a test-only tree: its ``@ops`` tests use the installed torch's op_db on both sides)."""
    digest = hashlib.sha256()
    found = False
    for rel in OPINFO_SOURCES:
        path = root / rel
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.is_file() else []:
            digest.update(file.relative_to(root).as_posix().encode() + b"\0" + file.read_bytes())
            found = True
    return digest.hexdigest()[:16] if found else None


def hashes(root: Path, files: Sequence[str], state_dir: Path, jobs: int | None = None) -> dict[str, str]:
    """``file::generic`` -> content hash for the tests of ``files`` (index only, no embeddings;
    ``jobs``: parsing processes, None for the builder's choice).

    An ``@ops`` test's hash also covers the tree's op_db when the tree has one: between two
    PyTorch releases the same test source instantiates other ops, so it is "changed".
    """
    present = [f for f in files if (root / f).is_file()]
    if not present:
        return {}
    build(root, present, state_dir, embed=False, jobs=jobs)
    opinfo = opinfo_digest(root)
    with Memory.open(state_dir) as memory:
        wanted = set(present)
        return {str(TestKey.of(path, generic)): content + (f"+ops:{opinfo}" if opinfo and _is_ops(decorators) else "")
                for path, generic, content, decorators in memory.store.test_hashes() if path in wanted}


def _is_ops(decorators: Sequence[str]) -> bool:
    return any(Decorator(name).short == "ops" for name in decorators)


def _config_files(config: Path, root: Path) -> list[str]:
    """Upstream files the old config lists, relative to ``root``."""
    if not any(config.rglob("*.yaml")):
        return []
    out = []
    for file in load_config(config, torch_root=root).files:
        try:
            out.append(file.resolved_path.resolve().relative_to(root.resolve()).as_posix())
        except ValueError:
            continue
    return out


def changed_sources(old_root: Path, new_root: Path, files: Sequence[str]) -> list[str]:
    """Kept files present in both trees whose bytes differ: they may have stopped importing
    although none of their tests changed (an import line did)."""
    return [f for f in files if (old_root / f).is_file() and (old_root / f).read_bytes() != (new_root / f).read_bytes()]


@dataclass(frozen=True)
class ImportChecks:
    """Files decided as a whole because they do not import, across the upgrade."""

    before: dict[str, str]  # in the old configs: file -> reason
    recheck: tuple[str, ...]  # collected by the delta run though none of their tests changed
    reimport: frozenset[str]  # tests of files that did not import before: evaluated in full

    def summary(self, now: dict[str, str], kept: Sequence[str]) -> dict[str, Any]:
        """``now``: the delta run's files that do not import (file -> error line)."""
        return {"stopped": {f: e for f, e in sorted(now.items()) if f not in self.before},
                "still": {f: e for f, e in sorted(now.items()) if f in self.before},
                "again": sorted(f for f in self.before if f in kept and f not in now),
                "rechecked": len(self.recheck)}


def import_checks(opts: UpgradeOptions, files: Sequence[str], new: dict[str, str], changed: Sequence[str]) -> ImportChecks:
    """Which files the delta run must collect beyond its tests' files (``changed``: those
    whose source changed), and which tests of files that did not import before it evaluates
    (each file is decided again: it may import now)."""
    before = file_decisions(opts.config)
    kept = set(files)
    reimport = frozenset(k for k in new if TestKey.parse(k).file in before and TestKey.parse(k).file in kept)
    return ImportChecks(before, tuple(changed), reimport)


def _import_errors(state: dict[str, Any] | None) -> dict[str, str]:
    return not_importing(RunStore(Path(state["run_dir"]))) if state else {}


def _report(opts: UpgradeOptions, delta: TestDelta, carried: CarryResult, state: dict[str, Any] | None,
            usage: dict[str, int], timings: dict[str, float], evaluated: int, imports: dict[str, Any]) -> dict[str, Any]:
    out = opts.run.out_dir
    emit = json.loads((out / "report.json").read_text(encoding="utf-8")).get("emit", {}) if state else {}
    data = {
        "old_root": str(opts.old_root.resolve()), "new_root": str(opts.run.torch_root.resolve()),
        "config": str(opts.config.resolve()), "counts": delta.summary(),
        "evaluated": f"evaluated {evaluated} of {delta.total} tests", "imports": imports,
        "changed": list(delta.changed), "added": list(delta.added),
        "moved": [{"old": m.old, "new": m.new, "kind": m.kind} for m in delta.moved],
        "removed": list(delta.removed), "carried_entries": carried.carried, "dropped_entries": carried.dropped,
        "emit": emit, "usage": usage, "seconds": round(sum(timings.values()), 3),
        "modes": mode_changes(ModeLookup(opts.config, opts.old_root.resolve()),
                              ModeLookup(opts.run.configs_dir, opts.run.torch_root),
                              [*delta.changed, *delta.added], delta.added),
        "timings_s": {k: round(v, 3) for k, v in timings.items()},
        "executed": bool(state and state.get("executed")),
    }
    atomic_write_text(out / "upgrade.json", json.dumps(data, indent=1, sort_keys=True) + "\n")
    atomic_write_text(out / "upgrade.md", _markdown(data))
    return data


def _markdown(data: dict[str, Any]) -> str:
    c = data["counts"]
    lines = [f"# testcurator upgrade: {data['old_root']} -> {data['new_root']}", "",
             (f"**{data['evaluated']}** (changed {c['changed']}, added {c['added']}); "
             f"unchanged {c['unchanged']}, moved/renamed {c['moved']} (decision carried over), removed {c['removed']}."), "",
             (f"Stages 3-4 ran on the delta only; its tests ran on the device: {'yes' if data['executed'] else 'no'}. "
             "The rest of the curated suite was not re-run."), ""]
    modes = {row["test"]: row for row in data.get("modes", [])}
    for title, items in (("Changed (re-evaluated): old -> new mode, and why", data["changed"]),
                         ("Added (evaluated): mode, and why", data["added"])):
        lines += [f"## {title} ({len(items)})", ""] + [wrap(mode_line(modes[k]) if k in modes else f"- `{k}`")
                                                       for k in items] + ["- none"] * (not items) + [""]
    lines += [f"## Moved or renamed ({len(data['moved'])})", ""]
    lines += [f"- {m['kind']}: `{m['old']}` -> `{m['new']}`" for m in data["moved"]] or ["- none"]
    dropped = {d["test"]: d for d in data["dropped_entries"]}
    imports = data["imports"]
    lines += ["", f"## Files that stopped importing: skipped as a whole, needs review ({len(imports['stopped'])})", ""]
    lines += [wrap(f"- `{f}`: {e}") for f, e in imports["stopped"].items()] or ["- none"]
    lines += ["", f"## Files that import again: their tests evaluated ({len(imports['again'])})", ""]
    lines += [f"- `{f}`" for f in imports["again"]] or ["- none"]
    if imports["still"]:
        lines += ["", f"## Files that still do not import ({len(imports['still'])})", ""]
        lines += [wrap(f"- `{f}`: {e}") for f, e in imports["still"].items()]
    lines += ["", f"## Removed upstream, dropped from the configs ({len(data['removed'])})", ""]
    lines += [f"- `{k}`" + (f" (had {dropped[k]['mode']}, written by the {dropped[k]['owner']})" if k in dropped else "")
              for k in data["removed"]] or ["- none"]
    emit = data.get("emit") or {}
    lines += ["", f"## Human edits kept on re-evaluated tests ({len(emit.get('kept_human', []))})", ""]
    lines += [f"- `{k}`" for k in emit.get("kept_human", [])] or ["- none"]
    if any(data["usage"].values()):  # all zero: the offline brain decided, no LLM was asked
        lines += ["", "## LLM usage", "", wrap("- " + ", ".join(f"{k} {v}" for k, v in sorted(data["usage"].items())))]
    lines += ["", f"Took {data['seconds']} s."]
    return "\n".join(lines) + "\n"


class Lap:
    """Seconds of each phase, each from the end of the one before."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._start = time.perf_counter()

    def __call__(self, phase: str) -> None:
        self.timings[phase] = time.perf_counter() - self._start
        self._start = time.perf_counter()


def warm_capture(opts: UpgradeOptions, files: Sequence[str], changed: Sequence[str]) -> WarmPytest | None:
    """The delta run's capture pytest, started now so that its imports (torch and the test
    machinery the changed and added files import) overlap the comparison of the trees; None
    where the capture would not run in it (no capture, more than one job or worker, another
    executor)."""
    ctx = opts.run
    if not (ctx.capture_ops and ctx.executor == "local" and ctx.shards == 1 and ctx.workers == 1):
        return None
    old_root = opts.old_root.resolve()
    new = set(changed) | {f for f in files if not (old_root / f).is_file()}
    return WarmPytest(ctx.torch_root, reference_env(), torch_test_modules(ctx.torch_root / f for f in sorted(new)))


def run_upgrade(opts: UpgradeOptions) -> dict[str, Any]:
    """Delta, carry-over, delta run, report; returns the report's data (``timings_s``: the
    seconds of each phase; the delta run's own stages are in its report.json)."""
    lap = Lap()
    if not opts.old_root.is_dir():
        raise MissingPathError(opts.old_root, "old torch root")
    if not opts.config.exists():
        raise MissingPathError(opts.config, "config directory")
    ctx = opts.run
    scope = scope_tree(ctx.torch_root, ctx.brain, BrainContext(ctx.backend, frozenset(), ctx.torch_root))
    files = kept_files(ctx.torch_root, scope)
    changed = changed_sources(opts.old_root.resolve(), ctx.torch_root, files)
    warm = warm_capture(opts, files, changed)
    try:
        return _upgrade(opts, scope, files, changed, warm, lap)
    finally:
        if warm is not None:
            warm.close()


def _upgrade(opts: UpgradeOptions, scope: list[FileDecision], files: list[str], changed: list[str],
             warm: WarmPytest | None, lap: Lap) -> dict[str, Any]:
    ctx, say = opts.run, opts.run.say
    old_files = sorted(set(_config_files(opts.config, opts.old_root.resolve())) | set(files))
    # The old tree first, in the run's own memory: after the full run that curated it, that
    # memory holds its index, so this is a hash check per file instead of a parse of the whole
    # old tree; the new tree then re-parses only the files that differ.
    old = hashes(opts.old_root.resolve(), old_files, ctx.state_dir)
    # While the warm pytest imports on one core, parsing here beats a process pool that
    # spawns and imports its own workers on the same cores (3.9 against 5.1 s at 300 files).
    new = hashes(ctx.torch_root, files, ctx.state_dir, jobs=1 if warm is not None else None)
    delta = classify(old, new)
    c = delta.summary()
    say(f"delta: {c['changed']} changed, {c['added']} added, {c['moved']} moved/renamed, {c['removed']} removed, "
        f"{c['unchanged']} unchanged")
    checks = import_checks(opts, files, new, changed)
    lap("delta")
    copy_configs(opts.config, ctx.configs_dir)
    carried = carry_over(ctx.configs_dir, ctx.torch_root, ctx.profile, delta)
    lap("carry over")
    state = None
    evaluate = delta.evaluate | checks.reimport
    if evaluate or checks.recheck:
        # The scope just decided goes to the graph in the context; the delta run skips the brain.
        # Its capture also collects the files whose source changed: one may have stopped importing.
        delta_ctx = dataclasses.replace(ctx, only_tests=frozenset(TestKey.parse(k) for k in evaluate),
                                        recheck_files=frozenset(checks.recheck), scope=tuple(scope), warm=warm)
        state = run_nightly(delta_ctx)
    lap("delta run")
    imports = checks.summary(_import_errors(state), files)
    data = _report(opts, delta, carried, state, ctx.brain.usage.as_dict(), lap.timings, len(evaluate), imports)
    say(f"upgrade: {data['evaluated']}; report {ctx.out_dir / 'upgrade.md'}")
    return data
