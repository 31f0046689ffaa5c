"""The CPU op capture as shards on the run's executor, with each test's duration recorded.

The capture runs the kept tests once on CPU under the op-recording TorchDispatchMode
(``--curate-capture-ops``). Here it is split like every heavy step: N jobs, each one
pytest over the same files keeping only its shard (``--curate-shard K/N``, balanced by the
durations recorded so far), on the local executor or on Ray. A capture shard runs on the
reference device, so on Ray it asks for CPUs only, not for the backend's device.

Test failures are evidence, not errors, and so is a pytest that dies part way (a test
that segfaults on CPU): what it wrote is kept. A shard whose pytest did not do its job
(usage or internal error, interrupt, no selection, tests selected but not run:
``runner/reconcile.py``) failed as infrastructure, and is retried by the executor.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from testcurator.errors import ExecutionError
from testcurator.runner.command import pytest_argv, reference_env, run_logged
from testcurator.runner.durations import DurationStore
from testcurator.runner.eventlog import EventFold, EventTail
from testcurator.runner.executors import Executor, Job
from testcurator.runner.reconcile import pass_fault
from testcurator.runner.records import TestRecord
from testcurator.sharding import write_test_durations

CAPTURE_TIMEOUT = 120.0


@dataclass(frozen=True)
class CaptureJob:
    torch_root: Path
    files: tuple[str, ...]
    work: Path
    shard: str | None
    durations: Mapping[str, float]
    workers: int = 1
    timeout: float = CAPTURE_TIMEOUT


@dataclass(frozen=True)
class CaptureOutput:
    captured: str  # the capture's JSON lines
    records: tuple[TestRecord, ...]  # outcome and duration of each test


def capture_shard(job: CaptureJob) -> CaptureOutput:
    """The job body: one pytest over ``job.files`` on CPU, keeping shard ``job.shard``."""
    if job.work.exists():
        shutil.rmtree(job.work)  # a retried shard starts over
    job.work.mkdir(parents=True)
    part, events = job.work / "captured.jsonl", job.work / "events.jsonl"
    # One upstream file that does not import must not stop the capture of all the others.
    cmd = pytest_argv("-q", "--continue-on-collection-errors", f"--curate-capture-ops={part}",
                      f"--curate-timeout={job.timeout}", f"--curate-events={events}")
    if job.workers > 1:
        cmd += ["-n", str(job.workers)]
    if job.shard is not None:
        write_test_durations(job.work / "durations.json", job.durations)
        cmd += [f"--curate-shard={job.shard}", f"--curate-durations={job.work / 'durations.json'}"]
    returncode = run_logged([*cmd, *job.files], cwd=job.torch_root, env=reference_env(), log=job.work / "capture.log")
    parts = sorted(job.work.glob(part.name + "*"))
    fold = EventFold()
    for source, event in EventTail(events).poll():
        fold.feed(source, event)
    fault = pass_fault(returncode, fold, job.work / "capture.log")
    if fault is not None:
        raise ExecutionError(f"op capture {job.shard or ''}: {fault}")
    captured = "".join(p.read_text(encoding="utf-8") for p in parts)
    return CaptureOutput(captured, tuple(fold.finished_records().values()))


def run_capture(
    torch_root: Path, files: Sequence[str], out: Path, work: Path, *, state_dir: Path, executor: Executor,
    shards: int = 1, workers: int = 1,
) -> bool:
    """Capture ``files`` into ``out`` (JSON lines); False when nothing was captured.

    The reference device is the CPU: give an executor whose jobs ask for no device."""
    with DurationStore(state_dir) as store:
        known = store.known_for("cpu") if shards > 1 else {}
        jobs = [Job(f"capture shard {k}/{shards}", capture_shard,
                    CaptureJob(torch_root, tuple(files), work / f"{k}-of-{shards}", f"{k}/{shards}" if shards > 1 else None,
                               known, workers))
                for k in range(1, shards + 1)]
        outputs = executor.run(jobs)
        store.record([r for o in outputs for r in o.records], "capture")
    text = "".join(o.captured for o in outputs)
    if not text:
        return False
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    return True
