"""A full run's CPU op capture: what to run (memory/capture_select.py), cached per file, with progress.

1. The device's own collection (``--collect-only`` with the backend, as the draft will
   collect) says which tests the device instantiates; the CPU collection (the static map)
   lists every CPU instance. :func:`~testcurator.memory.capture_select.select` keeps one
   instance per kind that can matter (nothing the backend profile rules out), within the budget.
2. Per file, the capture is cached by the file's content, the kept instances, the torch
   version and the capture format: a warm run captures only the files that changed (or
   whose selection did), and reuses the others' records.
3. The kept instances of the files left run through ``--curate-only`` (by identity, so no
   other test is even instantiated) in the sharded capture, with a progress line. Those
   that fail run again at once without the dispatch mode, in the same pytest
   (``--curate-capture-confirm``): a failure the mode caused is not the test's, and a reason
   must not quote it as "fails on CPU too".
4. The instances of a captured kind that did not run get projected records.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testcurator.files import atomic_write_text
from testcurator.installed import torch_version
from testcurator.memory.capture_select import RuleOut, Selection, project, select
from testcurator.memory.capture_shards import run_capture
from testcurator.plugin.oprecord import OpRecord, read_records
from testcurator.runner.shards.executors import Executor
from testcurator.runner.ticker import LineCounter, Ticker
from testcurator.runner.warm import WarmPytest
from testcurator.vocab import TestKey

# 3: calls and replayable examples (the probe); 4: storage arguments; 5: examples of calls that worked;
# 6: failures confirmed without the dispatch mode (and --curate-only no longer narrows at run time),
# so that no cached record keeps a failure the capture itself caused; 7: the calls that only raised;
# 8: DLPack's Python-level calls (callspec.PYTHON_CALLS); 9: torch.nn modules' forwards
# (callspec.MODULE_NAMESPACE) and sparse COO examples; 10: a sparse call's key names its layout;
# 11: failures confirmed in the capture's own pytest (``mode_failure``); 12: a raising twin names
# the exception's type (callspec.raise_call); 13: a call whose ``sparse`` flag is set is keyed sparse;
# 14: the layouts of the calls, read where they were made (``layouts``); 15: the writing twins of
# views the test wrote into (callspec.write_call); 16: a raising twin names its message's
# signature too (callspec.error_signature)
CAPTURE_FORMAT = "oprecord/16"
# An instance no earlier capture timed is estimated at this many CPU seconds: the mean of
# 731 instances of 11 real upstream files on 2 cores (bench/gen_tree.py states the spread).
DEFAULT_INSTANCE_S = 0.13
# The capture's budget when none is given (`run` without --capture-budget-s or --capture-all),
# in estimated CPU seconds (DEFAULT_INSTANCE_S each, see _estimate): about 2,300 instances.
# Measured (2 cores, 1 shard, load 6): the 1,314 instances kept of test_testing (estimated 171 s) took 690 s of
# wall, 0.53 s each; the bench's cost distribution (bench/gen_tree.py, mean 0.127 s) runs
# near the estimate. So the capture of a cold 1,000-file tree stays within about a third of
# bench/scale.py's 20 minutes on an idle machine, and a tree that needs less is not cut.
DEFAULT_CAPTURE_BUDGET_S = 300.0
# The budget is an estimate; what bounds the capture's wall is its limit: three times the budget,
# and at least CAPTURE_LIMIT_FLOOR_S (a pytest's start and collection are not in the estimate).
# Upstream test_modules' float64 gradchecks take seconds to minutes each under the dispatch
# mode, 20 to 1,000 times the estimate: OpenReg's cold capture of 5 real files (1,726 kept
# instances, budget 300 s) ran over 20 minutes. A capture stopped at its limit keeps what it
# recorded; the instances it did not run are left out, as those over the budget are, and the
# file is cached so: what a cold capture keeps depends on the machine's load that night. At
# twice the budget (600 s), curatedev's capture of those files, which took 173 s on an
# idle machine, was stopped with 158 of 1,464 instances left at a load of 6 on 2 cores.
CAPTURE_LIMIT_FACTOR = 3.0
CAPTURE_LIMIT_FLOOR_S = 120.0
CACHE_DIR = "capture/files"


@dataclass(frozen=True)
class DeviceTarget:
    """How to collect on the device: its torch name, the backend to import, its environment."""

    device: str
    backend: str | None
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CapturePlan:
    """Where the capture runs and what bounds it (the memory stage's :class:`CaptureRun` parts)."""

    executor: Executor
    shards: int = 1
    workers: int = 1
    warm: WarmPytest | None = None
    budget_s: float | None = None
    rule_out: RuleOut | None = None  # what the profile rules out (None: capture all the device instantiates)


def capture_kept(torch_root: Path, files: Sequence[str], cpu: Sequence[OpRecord],
                 on_device: Callable[[str, str], bool] | None, *, state_dir: Path, work: Path, plan: CapturePlan,
                 say: Callable[[str], None]) -> tuple[list[OpRecord], dict[str, Any]]:
    """The captured and projected records for ``files``, and the capture's figures."""
    selection = select(cpu, on_device, cost=_estimate, budget_s=plan.budget_s,
                       rule_out=plan.rule_out)
    per_file = _by_file(selection)
    caches = {rel: _cache_path(state_dir, torch_root, rel, per_file.get(rel, ())) for rel in files}
    todo = [rel for rel in files if per_file.get(rel) and not caches[rel].exists()]
    fresh, mode_failures, stopped = (_capture(torch_root, todo, per_file, caches, state_dir=state_dir, work=work,
                                              plan=plan, say=say) if todo else ({}, 0, 0))
    captured = [rec for rel in files if per_file.get(rel)
                for rec in (fresh[rel] if rel in fresh else _read(caches[rel]))]
    projected = project(cpu, captured, selection)
    reruns = [rec.rerun_s for recs in fresh.values() for rec in recs if rec.rerun_s is not None]
    left_out = dict(selection.left_out)
    if stopped:
        left_out[f"not run: the capture stopped at its limit ({capture_limit(plan.budget_s):.0f} s)"] = stopped
    figures = {"instances": len([r for r in cpu if r.source == "static"]), "kept": len(selection.keep) - stopped,
               "left_out": left_out, "projected": len(projected), "files_captured": len(todo),
               "files_reused": len([rel for rel in files if per_file.get(rel)]) - len(todo),
               "estimate_s": selection.estimate_s, "budget_s": plan.budget_s, "mode_failures": mode_failures,
               "reruns": len(reruns), "rerun_s": round(sum(reruns), 1),
               "rule_out": plan.rule_out.describe() if plan.rule_out is not None else None}
    return captured + projected, figures


def _estimate(rec: OpRecord) -> float:
    """An instance's estimated CPU seconds: the same fixed estimate, run after run.

    Not the instance's own last capture time: with learned times the budget bought other
    instances on the second run than on the first (on the real corpus, 3,484 where the cold run
    kept 2,307), each file's kept set changed, and with it the file's cache key, so a warm run
    with nothing changed captured again. A fixed estimate keeps the selection, and so the
    cache, stable while the tree, the torch and the device's collection stay the same.
    """
    return DEFAULT_INSTANCE_S


def capture_limit(budget_s: float | None) -> float | None:
    """The seconds of wall a capture within ``budget_s`` may run (None: no budget, no limit)."""
    return None if budget_s is None else max(CAPTURE_LIMIT_FACTOR * budget_s, CAPTURE_LIMIT_FLOOR_S)


def _by_file(selection: Selection) -> dict[str, tuple[OpRecord, ...]]:
    out: dict[str, list[OpRecord]] = {}
    for rec in selection.keep:
        out.setdefault(TestKey.parse(rec.nodeid).file, []).append(rec)
    return {rel: tuple(recs) for rel, recs in out.items()}


def _cache_path(state_dir: Path, torch_root: Path, rel: str, kept: Sequence[OpRecord]) -> Path:
    digest = hashlib.sha256(f"{CAPTURE_FORMAT}\0{torch_version()}\0{rel}\0".encode())
    digest.update((torch_root / rel).read_bytes())
    digest.update("\n".join(r.nodeid for r in kept).encode())
    return state_dir / CACHE_DIR / f"{digest.hexdigest()[:24]}.jsonl"


def _read(path: Path) -> list[OpRecord]:
    return [rec for rec in read_records(path) if rec is not None] if path.exists() else []


def _capture(torch_root: Path, todo: Sequence[str], per_file: Mapping[str, Sequence[OpRecord]],
             caches: Mapping[str, Path], *, state_dir: Path, work: Path, plan: CapturePlan,
             say: Callable[[str], None]) -> tuple[dict[str, list[OpRecord]], int, int]:
    """Capture the kept instances of ``todo``: each file's records, written to its cache when
    every kept instance of the file was recorded (or left at the capture's limit); how many
    failures the dispatch mode caused; how many kept instances the limit left unrun."""
    kept = Selection(tuple(rec for rel in todo for rec in per_file[rel]))
    folder = work / "capture"
    folder.mkdir(parents=True, exist_ok=True)
    keys = folder / "kept.tests"
    # Relative to the torch root, which the capture's pytest has as its rootdir (tree_options).
    atomic_write_text(keys, kept.lines())
    out = folder / "captured-all.jsonl"
    say(f"capture: {len(kept.keep)} instance(s) of {len(todo)} file(s) on CPU")
    counter = LineCounter(folder, "*/events.jsonl*", b'"event": "finish"')
    died: set[str] = set()
    stopped: set[str] = set()
    limit = capture_limit(plan.budget_s)
    with Ticker.counting("capture", "instances", len(kept.keep), counter, say):
        # With no durations known (a first capture), the files with the fewest kept instances
        # run first: upstream's large generated files (OpInfo) are thousands of short instances,
        # its small ones hold the long tests (test_weak.py's two 6 s threaded tests, last in
        # the corpus's order, kept one worker alone for 12 s). Known durations reorder this
        # (memory/capture_shards.py plan_targets); each file keeps its own order.
        fewest_first = sorted(todo, key=lambda rel: len(per_file[rel]))
        run_capture(torch_root, fewest_first, out, folder, state_dir=state_dir, executor=plan.executor, shards=plan.shards,
                    workers=plan.workers, extra=("--curate-only", str(keys), "--curate-capture-confirm"),
                    warm=plan.warm, died=died, limit_s=limit, stopped=stopped)
    records = _read(out)
    unrun = {rec.nodeid for rec in kept.keep} & stopped
    if stopped:
        say(f"capture: stopped at its limit ({limit:.0f} s, for a budget of {plan.budget_s:.0f} estimated s): "
            f"{len(unrun)} kept instance(s) not run, left out like those over the budget")
    mode_failures = sum(r.mode_failure for r in records)
    if mode_failures:
        say(f"capture: {mode_failures} instance(s) failed under the dispatch mode and passed when run again without "
            "it (the failure is not the test's)")
    found: dict[str, list[OpRecord]] = {}
    for rel in todo:
        mine = [r for r in records if TestKey.parse(r.nodeid).file == rel]
        ran = {r.nodeid for r in mine if r.source == "captured"}
        missing = {r.nodeid for r in per_file[rel]} - ran
        if missing and not missing <= died | stopped:
            # A pytest that died part way kept what it wrote: used now, not cached, so that a
            # later run tries the rest again.
            say(f"capture: {rel}: {len(ran)} of {len(per_file[rel])} kept instance(s) recorded; not cached")
        else:
            # Instances that killed their process (the capture's timeout: holdout test_modules'
            # float64 gradchecks under the dispatch mode) kill it again: captured again each
            # night, they cost one 1,400 s memory stage a night and add nothing.
            if missing:
                say(f"capture: {rel}: {len(ran)} of {len(per_file[rel])} kept instance(s) recorded, the others "
                    "timed out or crashed on CPU, or the capture stopped at its limit; cached without them")
            atomic_write_text(caches[rel], "".join(r.to_json() + "\n" for r in mine))
        found[rel] = mine
    return found, mode_failures, len(unrun)


def summary(figures: Mapping[str, Any]) -> str:
    """One line for the log."""
    left = figures.get("left_out") or {}
    why = "; ".join(f"{n} {reason}" for reason, n in left.items()) or "none"
    budget = f", budget {figures['budget_s']:.0f} s" if figures.get("budget_s") is not None else ""
    return (f"capture: ran {figures['kept']} of {figures['instances']} CPU instance(s) (left out: {why}); "
            f"{figures['files_captured']} file(s) captured, {figures['files_reused']} reused{budget}")


def report_lines(figures: Mapping[str, Any]) -> list[str]:
    """The report's bullets: what ran, what was left out and why, what was reused."""
    if not figures:
        return []
    lines = [f"- ran {figures['kept']} of the {figures['instances']} CPU instance(s) of the kept files "
             f"(estimated {figures['estimate_s']} CPU s"
             + (f", budget {figures['budget_s']:.0f} s" if figures.get("budget_s") is not None else "") + ")"]
    lines += [f"- left out, {reason}: {n}" for reason, n in (figures.get("left_out") or {}).items()]
    if figures.get("mode_failures"):
        lines.append(f"- failed under the capture's dispatch mode and not without it (outcome taken from the run "
                     f"without it): {figures['mode_failures']}")
    if figures.get("reruns"):
        lines.append(f"- failures run again at once without the mode, to tell the test's failure from the mode's: "
                     f"{figures['reruns']}, {figures['rerun_s']} s of test time")
    if figures.get("rule_out"):
        lines.append(f"- the profile rules out what it does not declare ({figures['rule_out']}): the config skips "
                     "those instances whatever they do on CPU (`--capture-all` captures them too)")
    lines.append(f"- projected records (a captured kind's ops at another dtype, no CPU outcome): {figures['projected']}")
    lines.append(f"- files captured now: {figures['files_captured']}; reused from an earlier capture "
                 f"(same file, selection and torch): {figures['files_reused']}")
    return lines
