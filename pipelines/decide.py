"""The brain's stages on one file of a run: bucket and refine, from the run's inputs.

The nightly graph's nodes (pipelines/nightly/steps.py), ``eval``'s brains asked again
(pipelines/evaluate.py) and the emit guard's offline redecisions all decide through here,
on what the run directory holds: the memory stage's evidence, the probe's findings, the
draft's results and the human decisions in the current configs.

Bucket and refine run once per file, in a fan-out's threads, and share run-wide inputs;
:func:`_once` reads each once (one entry per name, keyed by the state (path, mtime, size)
of the files it reads, so a changed input is read again and a resumed run computes the same
values): the evidence, the probe's, the draft's results, the test names the rails accept,
and the human decisions in the current configs (their state read once per run: nothing
writes the configs before the run's emit step).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from testcurator.agents.brain import BrainContext, ExecutionRecord
from testcurator.agents.bucket import bucket_tests, requests_for_file
from testcurator.agents.decision import Decision
from testcurator.agents.refine import group_records, refine_tests
from testcurator.memory.api import Memory
from testcurator.memory.capability import ProbeEvidence, read_probe_evidence
from testcurator.memory.evidence import TestEvidence, read_evidence
from testcurator.memory.paths import memory_db_path
from testcurator.memory.stage import EVIDENCE
from testcurator.pipelines import emit as emitter
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.probe import PROBE_EVIDENCE
from testcurator.pipelines.store import RunStore
from testcurator.runner.results.records import read_jsonl
from testcurator.vocab import TestKey


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


def executions(ctx: RunContext, store: RunStore) -> Mapping[TestKey, list[ExecutionRecord]]:
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


def requests(ctx: RunContext, store: RunStore, rel: str) -> list[Any]:
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
    return bucket_tests(ctx.brain, brain_context(ctx, store), requests(ctx, store, rel))


def refine(ctx: RunContext, store: RunStore, rel: str) -> list[Decision]:
    if rel in not_importing(store):
        return []
    previous = store.read_decisions("bucket", rel) or []
    return refine_tests(ctx.brain, brain_context(ctx, store), requests(ctx, store, rel), previous,
                        executions(ctx, store))


def offline_decisions(ctx: RunContext, store: RunStore, rel: str, tests: Sequence[str], refined: bool) -> dict[str, Decision]:
    """The LLM brain's fallback's decisions for ``tests`` of ``rel`` (emit_guard)."""
    fallback = getattr(ctx.brain, "fallback", ctx.brain)
    wanted = set(tests)
    asked = [r for r in requests(ctx, store, rel) if r.test in wanted]
    if refined:
        decided = refine_tests(fallback, brain_context(ctx, store), asked, store.read_decisions("bucket", rel) or [],
                               executions(ctx, store))
    else:
        decided = bucket_tests(fallback, brain_context(ctx, store), asked)
    return {d.test: d for d in decided}
