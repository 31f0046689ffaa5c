"""One night in the memory of runs: assessed before emit, recorded when the report is written.

:func:`assess_night` reads tonight's judge and draft results, the tests' source hashes and
the history of the same ``--out`` (memory/history.py), and writes ``nights.json`` (what
broke, what is flaky, which entries stay as they stand: pipelines/nights/assess.py) for
emit and the report. :func:`record_night` stores the run (identity, sources, every phase's
per-instance outcomes) and keeps the history bounded: the run folders and checkpoints of
compacted runs go too.
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from testcurator.files import atomic_write_text
from testcurator.memory.history import STATUS_PHASES, History, RunIdentity, passed
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.nights import chart, identity, since
from testcurator.pipelines.nights.assess import Assessment, Night, assess
from testcurator.pipelines.store import RunStore
from testcurator.runner.results.records import TestRecord, read_jsonl
from testcurator.vocab import TestKey

NIGHTS = "nights.json"
CHART = "history.html"
PHASE_DIRS = {"judge": "judge", "draft": "exec", "verify": "verify"}


DRAFT_KEY = "draft_key.json"  # in the draft's results folder: what the draft's outcomes depend on
REUSED = "reused_from.json"


def _draft_key(ctx: RunContext, store: RunStore, now: RunIdentity) -> dict[str, Any]:
    from testcurator import __version__
    from testcurator.memory.run_identity import config_digest

    return {"backend": now.backend_digest, "torch": now.torch_version, "upstream": now.upstream_revision,
            "testcurator": __version__, "draft_config": config_digest(store.path("exec_config")),
            "device": ctx.device, "retries": ctx.retries, "timeout": ctx.timeout,
            "memory_limit_mb": ctx.memory_limit_mb, "recycle_mb": ctx.recycle_mb}


def reuse_draft(ctx: RunContext, store: RunStore) -> str | None:
    """When nothing the draft depends on changed since the previous run of this ``--out``
    (its key: backend, torch, upstream tree, testcurator, the draft config, device, retries,
    timeout), copy that run's draft results into this run folder and name the run; else write
    tonight's key for the next run and return None. The standing configs still run every
    night (the judge): that is where a flaky test or a regression shows."""
    now = identity.read(store)
    results = store.path(PHASE_DIRS["draft"], "results.jsonl")
    if now is None or ctx.delta or results.exists():
        return None
    key = _draft_key(ctx, store, now)
    store.write_json(f"{PHASE_DIRS['draft']}/{DRAFT_KEY}", key)
    with History(ctx.state_dir) as history:
        before = [r for r in history.runs(str(ctx.out_dir)) if r.run_id != now.run_id]
    if not before:
        return None
    prev = RunStore(ctx.state_dir / "runs" / before[-1].run_id)
    done = prev.path(PHASE_DIRS["draft"], "results.jsonl")
    if prev.read_json(f"{PHASE_DIRS['draft']}/{DRAFT_KEY}") != key or not done.is_file():
        return None
    shutil.copyfile(done, results.with_suffix(".tmp"))
    results.with_suffix(".tmp").replace(results)
    store.write_json(f"{PHASE_DIRS['draft']}/{REUSED}", {"run_id": before[-1].run_id})
    return before[-1].run_id


def draft_reused(store: RunStore) -> bool:
    return store.has(f"{PHASE_DIRS['draft']}/{REUSED}")


def phase_records(store: RunStore, phase: str) -> list[TestRecord]:
    path = store.path(PHASE_DIRS[phase], "results.jsonl")
    return read_jsonl(path) if path.is_file() else []


def first_phase(read: Callable[[str], list[TestRecord]], order: Sequence[str]) -> list[TestRecord]:
    """The records of the first phase of ``order`` that has any (none: empty)."""
    return next((recs for phase in order if (recs := read(phase))), [])


def assess_night(ctx: RunContext, store: RunStore, files: Sequence[str]) -> Assessment:
    """``nights.json`` of this run (computed once: a resumed run reads it back)."""
    if store.has(NIGHTS):
        return Assessment.from_json(store.read_json(NIGHTS))
    now = identity.read(store)
    if now is None:  # a run started before run identities were taken: nothing to compare
        result = Assessment()
    else:
        with History(ctx.state_dir) as history:
            draft = [] if draft_reused(store) else phase_records(store, "draft")
            night = Night.load(history, now, phase_records(store, "judge"), draft, identity.test_hashes(ctx, files))
        policy = ctx.profile.flaky
        result = assess(night, accept_regressions=ctx.accept_regressions, policy=policy.policy,
                        flips_to_quarantine=policy.flips)
    store.write_json(NIGHTS, result.to_json())
    return result


def read_assessment(store: RunStore) -> Assessment:
    data = store.read_json(NIGHTS)
    return Assessment.from_json(data) if data else Assessment()


def record_night(ctx: RunContext, store: RunStore, files: Sequence[str], code: int) -> RunIdentity | None:
    """Store this run in the history (again, replacing itself, when a resumed run reports);
    then drop the run folders and checkpoints of runs beyond ``ctx.history_keep``."""
    now = identity.read(store)
    if now is None:
        return None
    hashes = identity.test_hashes(ctx, files)
    # A draft copied from an earlier run did not run tonight: its outcomes are that run's.
    phases = {phase: phase_records(store, phase) for phase in PHASE_DIRS if phase != "draft" or not draft_reused(store)}
    with History(ctx.state_dir) as history:
        recorded = history.record(identity.finished(now, ctx, code),
                                  ((k.file, k.name, h) for k, h in sorted(hashes.items())), phases,
                                  keep=ctx.history_keep)
        old = [r.run_id for r in history.runs(str(ctx.out_dir)) if r.seq <= recorded.seq][:-ctx.history_keep]
    _prune(ctx, old)
    return recorded


def _prune(ctx: RunContext, run_ids: Sequence[str]) -> None:
    """Run folders and checkpoint threads of runs the history compacted."""
    runs = ctx.state_dir / "runs"
    gone = [rid for rid in run_ids if (runs / rid).is_dir()]
    for rid in gone:
        shutil.rmtree(runs / rid, ignore_errors=True)
    if gone and (ctx.state_dir / "checkpoints.sqlite").is_file():
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(str(ctx.state_dir / "checkpoints.sqlite")) as saver:
            for rid in gone:
                saver.delete_thread(rid)


def standing_dir(store: RunStore) -> Path | None:
    path = store.path("standing")
    return path if path.is_dir() else None


def passing_per_file(records: Sequence[TestRecord]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        if passed(r):
            file = TestKey.parse(r.nodeid).file
            out[file] = out.get(file, 0) + 1
    return out


def close_night(ctx: RunContext, store: RunStore, files: Sequence[str], code: int,
                pending: int) -> dict[str, Any] | None:
    """At the report: what changed since the previous run (``since``, before this run is
    recorded), then the run recorded, then the trend page written (``<out>/history.html``)."""
    now = identity.read(store)
    if now is None:
        return None
    now = identity.finished(now, ctx, code)
    read = functools.cache(lambda phase: phase_records(store, phase))  # a phase's results read once
    curated = first_phase(read, ("verify", "judge", "draft"))  # coverage: the configs as written
    hashes = identity.test_hashes(ctx, files)
    with History(ctx.state_dir) as history:
        # Tonight's statuses from one phase, as history's (STATUS_PHASES): judge, else verify.
        tonight = first_phase(read, STATUS_PHASES)
        data = since.since(history, now, tonight, hashes,
                           read_assessment(store), since.config_changes(standing_dir(store), ctx.configs_dir),
                           passing_per_file(curated), pending)
    record_night(ctx, store, files, code)
    with History(ctx.state_dir) as history:
        runs = history.runs(str(ctx.out_dir))
        per_run = history.counts(str(ctx.out_dir))
    atomic_write_text(ctx.out_dir / CHART, chart.page(ctx.profile.name, runs, per_run))
    return {**data, "chart": CHART}
