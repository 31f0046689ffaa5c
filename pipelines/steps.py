"""The work behind the nightly graph's nodes, kept apart so each node stays a few lines.

Every step reads its inputs from the run directory (RunStore) and the memory, and writes
its outputs there. Bucket and refine run once per file, in a fan-out's threads, and share
run-wide inputs; :func:`_once` reads each once (one entry per name, keyed by the state
(path, mtime, size) of the files it reads, so a changed input is read again and a resumed
run computes the same values): the memory stage's evidence, the probe's, the draft's
results, the test names the rails accept, and the human decisions in the current configs
(their state read once per run: nothing writes the configs before the run's emit step).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from testcurator.agents.brain import BrainContext, ExecutionRecord
from testcurator.agents.bucket import bucket_tests, requests_for_file
from testcurator.agents.decision import LLM_BRAIN, Decision
from testcurator.agents.refine import group_records, refine_tests
from testcurator.config.editor import ConfigEditor
from testcurator.config.layout import config_path, raw_path
from testcurator.errors import ExecutionError
from testcurator.memory.api import Memory
from testcurator.memory.capability import ProbeEvidence, read_probe_evidence
from testcurator.memory.evidence import TestEvidence, read_evidence
from testcurator.memory.paths import memory_db_path
from testcurator.memory.stage import EVIDENCE
from testcurator.pipelines import emit as emitter
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.emit_guard import check_before_disk
from testcurator.pipelines.probe import PROBE_EVIDENCE, ProbeTarget, run_probe
from testcurator.pipelines.store import RunStore
from testcurator.plugin.only import write_keys
from testcurator.runner.command import RunSpec
from testcurator.runner.durations import DurationStore
from testcurator.runner.progress import LineProgress
from testcurator.runner.executors import Executor, ExecutorOptions, make_executor
from testcurator.runner.shardrun import run_sharded
from testcurator.runner.records import read_jsonl
from testcurator.runner.reconcile import is_infrastructure
from testcurator.runner.verdict import verdict
from testcurator.vocab import TestKey

EXEC_CONFIG = "exec_config"


def _stamp(path: Path) -> tuple[str, int, int]:
    st = path.stat() if path.exists() else None
    return (str(path), st.st_mtime_ns if st else 0, st.st_size if st else -1)


_CACHE: dict[str, tuple[Any, Any]] = {}
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()
T = TypeVar("T")


def _once(name: str, key: Any, load: Callable[[], T]) -> T:
    """``load()`` once per ``key`` (the state of the files it reads), one entry per ``name``.

    Bucket and refine run once per file of the tree and all read the same run-wide inputs:
    read once, not once per file (that added up on large trees). A fan-out runs its files
    in threads: the first to miss loads, the others wait for its value (unlocked, each of
    the pool's first threads loaded the same inputs again: a third of a delta run's bucket
    stage at 300 files)."""
    hit = _CACHE.get(name)
    if hit is not None and hit[0] == key:
        return hit[1]
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(name, threading.Lock())
    with lock:
        hit = _CACHE.get(name)
        if hit is not None and hit[0] == key:
            return hit[1]
        value = load()
        _CACHE[name] = (key, value)
        return value


def _evidence(store: RunStore) -> dict[TestKey, TestEvidence]:
    """``evidence.json`` of the run."""
    path = store.path(EVIDENCE)
    return _once("evidence", _stamp(path), lambda: read_evidence(path))


def _probe(store: RunStore) -> dict[TestKey, ProbeEvidence]:
    """The probe's findings per test (``probe_evidence.json``; none with ``--no-probe``)."""
    path = store.path(PROBE_EVIDENCE)
    return _once("probe", _stamp(path), lambda: read_probe_evidence(path))


def _executions(ctx: RunContext, store: RunStore) -> Mapping[TestKey, list[ExecutionRecord]]:
    """The draft's results, grouped per test (a plain dict: a shared value must not grow on a
    missing key as group_records' defaultdict would)."""
    path = store.path("exec", "results.jsonl")
    return _once("executions", (_stamp(path), str(ctx.torch_root)),
                 lambda: dict(group_records(read_jsonl(path), ctx.torch_root)))


def brain_context(ctx: RunContext, store: RunStore) -> BrainContext:
    """The facts the rails check against: every test memory or collection knows (the same
    for every file of a run)."""
    def load() -> frozenset[str]:
        known = {k.name for k in _evidence(store)}
        with Memory.open(ctx.state_dir) as memory:
            known.update(memory.store.generic_names())
        return frozenset(known)

    key = (_stamp(store.path(EVIDENCE)), _stamp(memory_db_path(ctx.state_dir)))
    return BrainContext(ctx.backend, _once("known", key, load), ctx.torch_root)


def _previous(ctx: RunContext, store: RunStore) -> dict[TestKey, tuple[str, str]]:
    """``emit.previous_decisions``, per state of the configs: a delta run starts from a full
    set of configs, and reloading all of them for every file it buckets cost more than the
    bucketing itself. The state is read once per run: nothing writes the configs before
    its emit step (stat-ing every config for every bucketed file cost half a second at 300)."""
    def state() -> tuple[Any, ...]:
        files = sorted(ctx.configs_dir.rglob("*.yaml")) + [ctx.configs_dir / emitter.SIDECAR] if ctx.configs_dir.is_dir() else []
        return (str(ctx.configs_dir), str(ctx.torch_root),
                tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files if f.exists()))

    key = _once("previous-state", (str(store.root), str(ctx.configs_dir), str(ctx.torch_root)), state)
    return _once("previous", key, lambda: emitter.previous_decisions(ctx.configs_dir, ctx.torch_root))


def _requests(ctx: RunContext, store: RunStore, rel: str) -> list[Any]:
    previous = _previous(ctx, store)
    with Memory.open(ctx.state_dir) as memory:
        # Delta mode: only the delta's tests are asked about (and so cost LLM calls).
        return requests_for_file(ctx.torch_root, memory, rel, _evidence(store), previous, _probe(store),
                                 select=None if ctx.only_tests is None else lambda generic: ctx.selected(rel, generic))


def not_importing(store: RunStore) -> dict[str, str]:
    """Kept files that do not import (file -> pytest's error line), from the memory stage.

    Such a file is decided as a whole: skipped, the error as the reason, marked for review
    (its config has no per-test entries: the tests a static index finds there cannot run,
    so no evidence can say anything about them). Once it imports again its tests are
    bucketed like any other."""
    return dict((store.read_json("memory.json", {}) or {}).get("import_errors") or {})


def decided_files(ctx: RunContext, store: RunStore, files: Sequence[str]) -> list[str]:
    """The files whose configs this run writes: the run's files (:meth:`RunContext.run_files`)
    and, in a delta run, the rechecked files that stopped importing (decided as a whole)."""
    decided = ctx.run_files(files)
    broken = set(not_importing(store)) - set(decided)
    return decided + [f for f in files if f in broken]


def file_reason(error: str) -> str:
    return (f"NEEDS REVIEW: the whole file is skipped: it does not import ({error}). "
            "Its tests are decided once it imports again.")


def bucket(ctx: RunContext, store: RunStore, rel: str) -> list[Decision]:
    if rel in not_importing(store):
        return []
    return bucket_tests(ctx.brain, brain_context(ctx, store), _requests(ctx, store, rel))


def probe(ctx: RunContext, store: RunStore) -> dict[str, Any]:
    """Replay the captured calls on the device (new ones only); the findings per test go to
    ``probe_evidence.json`` for the bucket stage and the draft."""
    target = ProbeTarget(ctx.profile, ctx.profile_path, ctx.state_dir)
    return run_probe(target, evidence_out=store.path(PROBE_EVIDENCE), tests=ctx.only_tests, say=ctx.say)


def count_modes(store: RunStore, stage: str, files: Sequence[str]) -> str:
    counts: Counter[str] = Counter()
    for rel in files:
        counts.update(d.mode for d in store.read_decisions(stage, rel) or [])
    return ", ".join(f"{mode} {n}" for mode, n in sorted(counts.items())) or "no tests"


def write_exec_config(ctx: RunContext, store: RunStore, files: Sequence[str]) -> Path:
    """The draft as a config that runs every non-skipped test as mandatory (raw outcomes).

    Predicted failures run too: a prediction from the CPU capture is confirmed or overturned
    here, never emitted on its own (see pipelines/probe.py)."""
    root = store.path(EXEC_CONFIG)
    broken = not_importing(store)
    for rel in files:
        if rel in broken:
            continue  # nothing of it can run; its collection error would only repeat
        path = config_path(root, rel)
        editor = ConfigEditor.new(path, global_=emitter.capabilities(ctx.profile))
        specs = []
        for decision in store.read_decisions("bucket", rel) or []:
            spec = emitter.entry_for(decision)
            mode = "skip" if spec.mode == "skip" else "mandatory_success"
            specs.append(type(spec)(spec.names, mode, spec.reason, spec.edits))
        editor.update(raw_path(rel), specs)
        editor.save()
    return root


def executor(ctx: RunContext, resources: dict[str, float] | None = None) -> Executor:
    """The run's executor; a test shard asks for the profile's resources (the device)."""
    res = dict(ctx.profile.resources) if resources is None else resources
    return make_executor(ctx.executor, ExecutorOptions(resources=res, say=ctx.say))


def _run(ctx: RunContext, store: RunStore, config: Path, out: str, retries: int) -> list[Any]:
    done = store.path(out, "results.jsonl")
    if not done.exists():
        # A delta run's draft covers only the touched files, and --curate-only leaves out their
        # other tests at collection (the config would skip them one report at a time).
        keep = (("--curate-only", str(write_keys(store.path(out, "delta.tests"), ctx.only_tests, ctx.torch_root)))
                if ctx.only_tests else ())
        spec = RunSpec(out_dir=store.path(out), config=config, torch_root=ctx.torch_root, device=ctx.device,
                       backend=ctx.profile.backend_module, workers=ctx.workers, timeout=ctx.timeout, retries=retries,
                       env=tuple(sorted(ctx.backend_env().items())), unrelated_plugins_off=True, extra_args=keep)
        with DurationStore(ctx.state_dir) as durations:
            run_sharded(spec, shards=ctx.shards, executor=executor(ctx), store=durations,
                        source="draft" if out == "exec" else out,
                        progress=LineProgress("execute" if out == "exec" else out, ctx.say))
    return read_jsonl(done)


def execute_draft(ctx: RunContext, store: RunStore) -> None:
    records = _run(ctx, store, store.path(EXEC_CONFIG), "exec", ctx.retries)
    result = verdict(records, allow_empty=True)  # a draft of skips only runs nothing, rightly
    if result.infrastructure:
        # Refining on a draft pytest did not run would curate from nothing: stop here, and
        # move the results aside so that --resume runs the draft again.
        done = store.path("exec", "results.jsonl")
        done.replace(done.with_name("results.infrastructure.jsonl"))
        raise ExecutionError("the draft run on the device failed:\n" + "\n".join(result.lines(str(done.parent))))
    outcomes = Counter(r.outcome for r in records)
    ctx.say("execute: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))


def refine(ctx: RunContext, store: RunStore, rel: str) -> list[Decision]:
    if rel in not_importing(store):
        return []
    previous = store.read_decisions("bucket", rel) or []
    return refine_tests(ctx.brain, brain_context(ctx, store), _requests(ctx, store, rel), previous,
                        _executions(ctx, store))


def emit_configs(ctx: RunContext, store: RunStore, files: Sequence[str], *, refined: bool) -> list[str]:
    stage = "refine" if refined else "bucket"
    if any(d.brain == LLM_BRAIN for rel in files for d in store.read_decisions(stage, rel) or []):
        redone = check_before_disk(ctx.configs_dir, ctx.torch_root, store, stage, files,
                                   lambda folder: _emit_into(ctx, store, folder, files, refined),
                                   lambda rel, tests: _offline(ctx, store, rel, tests, refined))
        if redone:
            ctx.say(f"configs: {len(redone)} LLM decision(s) would not validate, decided offline (first: {redone[0]})")
    result = _emit_into(ctx, store, ctx.configs_dir, files, refined)
    store.write_json("emit.json", {"written": result.written, "kept_human": result.kept_human, "conflicts": result.conflicts})
    return result.written


def _emit_into(ctx: RunContext, store: RunStore, configs_dir: Path, files: Sequence[str], refined: bool) -> emitter.EmitResult:
    result = emitter.EmitResult()
    sidecar = emitter.load_sidecar(configs_dir)
    executed = set()
    if refined:
        executed = {key.name for key in _executions(ctx, store)}
    broken = not_importing(store)
    for rel in files:
        decisions = store.read_decisions("refine" if refined else "bucket", rel) or []
        reason = file_reason(broken[rel]) if rel in broken else None
        emitter.emit_file(configs_dir, ctx.torch_root, ctx.profile, rel, decisions, sidecar, executed, result,
                          drop_stale=not ctx.delta or rel in broken, file_reason=reason)
    emitter.save_sidecar(configs_dir, sidecar)
    return result


def _offline(ctx: RunContext, store: RunStore, rel: str, tests: Sequence[str], refined: bool) -> dict[str, Decision]:
    """The LLM brain's fallback's decisions for ``tests`` of ``rel`` (emit_guard)."""
    fallback = getattr(ctx.brain, "fallback", ctx.brain)
    wanted = set(tests)
    requests = [r for r in _requests(ctx, store, rel) if r.test in wanted]
    if refined:
        decided = refine_tests(fallback, brain_context(ctx, store), requests, store.read_decisions("bucket", rel) or [],
                               _executions(ctx, store))
    else:
        decided = bucket_tests(fallback, brain_context(ctx, store), requests)
    return {d.test: d for d in decided}


def verify(ctx: RunContext, store: RunStore) -> None:
    """Run the final curated suite as ``exec`` runs it (the same retries): mandatory failures
    now mean regressions. Without retries here, a test refine kept though flaky (it passed
    on retry in the draft, for review) failed the verification that ``exec`` passes: on
    real upstream files, three order-dependent LoggingTensor tests of test_subclass."""
    records = _run(ctx, store, ctx.configs_dir, "verify", retries=ctx.retries)
    result = verdict(records)
    tests = [r for r in records if not is_infrastructure(r)]
    outcomes = Counter(r.outcome for r in tests)
    flaky = sorted(r.nodeid for r in tests if r.flaky)
    store.write_json("verify.json", {
        "outcomes": dict(sorted(outcomes.items())),
        "tests": len(tests),
        "exit_code": result.code,
        "flaky": flaky,
        "mandatory_failures": sorted(r.nodeid for r in result.failures),
        "unexpected_passes": sorted(r.nodeid for r in tests if r.outcome == "xpassed"),
        "infrastructure": [r.evidence for r in result.infrastructure]
        + (["no test ran in the verification run"] if not tests else []),
        "lines": result.lines(str(store.path("verify", "results.jsonl"))),
    })
    ctx.say("verify: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
            + (f" ({len(flaky)} passed only on retry)" if flaky else ""))


def check_reasons(ctx: RunContext, store: RunStore, files: Sequence[str]) -> None:
    """Every emitted entry's reason against the run's results (pipelines/reason_check.py):
    ``reason_check.json`` for the report, and a line with the count."""
    from testcurator.pipelines import reason_check

    found = reason_check.check_run(store.root, ctx.configs_dir, ctx.torch_root, files)
    store.write_json("reason_check.json", reason_check.to_json(found))
    ctx.say(f"reasons: {len(found)} contradict the results" + (f" (first: {found[0].line()})" if found else ""))
