"""Run a selection as N shards on an executor, merge the shards, record the durations.

``run_sharded(spec, shards=N, executor=...)`` turns one :class:`RunSpec` into N jobs, one
per shard (``spec.shard = "K/N"``, output in ``<out>/shards/K-of-N/``), runs them on the
executor, writes every shard's files where the driver can read them, and merges them into
``<out>`` (``results.jsonl``, ``junit.xml``, ``manifest.json``: ``runner/shards/merge.py``). With
one shard on the local executor it is exactly :func:`execute`.

The shard split happens at collection in each shard's pytest (``--curate-shard``), where
the config's decisions are known; the durations it balances by travel with the job, so a
remote node needs no access to the driver's state directory. They are the store's, read
once for all N shards, or ``spec.durations`` when given: a leg of a matrix run one leg at a
time (``exec --shard``) splits by its matrix's frozen snapshot (``runner/shards/snapshot.py``),
never by the store its earlier legs have since written to.
"""

from __future__ import annotations

import os
import platform
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from testcurator.errors import ExecutionError
from testcurator.files import atomic_write_text
from testcurator.runner.command import RunSpec
from testcurator.runner.shards.durations import DurationStore
from testcurator.runner.execute import execute
from testcurator.runner.shards.executors import Executor, Job, LocalExecutor
from testcurator.runner.shards.merge import MANIFEST, RESULTS, merge_run_dirs
from testcurator.runner.progress import ProgressSink
from testcurator.runner.reconcile import is_infrastructure
from testcurator.runner.results.records import TestRecord
from testcurator.sharding import read_test_durations, write_test_durations

DURATIONS_FILE = "durations.json"


@dataclass(frozen=True)
class ShardJob:
    spec: RunSpec
    durations: Mapping[str, float]


@dataclass(frozen=True)
class ShardOutput:
    """What a shard sends back: its files' text, and where it ran."""

    shard: str
    host: str
    pid: int
    files: Mapping[str, str]


def run_shard(job: ShardJob) -> ShardOutput:
    """The job body (runs on the executor): a clean shard folder, one ``execute``."""
    out = job.spec.out_dir
    if out.exists():
        shutil.rmtree(out)  # a retried shard starts over; its pytest died with its worker
    out.mkdir(parents=True)
    durations = out / DURATIONS_FILE
    write_test_durations(durations, job.durations)
    result = execute(replace(job.spec, durations=durations))
    faults = [r for r in result.records if is_infrastructure(r)]
    if faults:
        # The executor retries a shard whose pytest failed (a lost device or node), and
        # reports it as an infrastructure failure when it fails again.
        raise ExecutionError(f"shard {job.spec.shard or '1/1'}: " + "; ".join(
            f"{r.evidence}\n{r.failure_text or ''}".strip() for r in faults))
    files = {name: (out / name).read_text(encoding="utf-8") for name in (RESULTS, MANIFEST, "junit.xml")}
    return ShardOutput(job.spec.shard or "1/1", platform.node(), os.getpid(), files)


def _absolute(spec: RunSpec) -> RunSpec:
    """Paths that mean the same on another process or node (no reliance on its cwd)."""
    paths = tuple(_abs_target(p) for p in spec.paths)
    return replace(spec, out_dir=spec.out_dir.resolve(), rootdir=spec.cwd, paths=paths,
                   config=spec.config.resolve() if spec.config else None,
                   torch_root=spec.torch_root.resolve() if spec.torch_root else None)


def _abs_target(target: str) -> str:
    path, sep, rest = target.partition("::")
    return str(Path(path).resolve()) + sep + rest if Path(path).exists() else target


def shard_dir(out: Path, index: int, count: int) -> Path:
    return out / "shards" / f"{index}-of-{count}"


def run_sharded(
    spec: RunSpec, *, shards: int = 1, executor: Executor | None = None, store: DurationStore | None = None,
    source: str = "exec", progress: ProgressSink | None = None,
) -> list[TestRecord]:
    """Run ``spec`` as ``shards`` shards on ``executor``; merged records (see module docstring)."""
    executor = executor or LocalExecutor()
    if shards == 1 and executor.name == "local":
        records = list(execute(_with_durations(spec, store), progress).records)
    elif spec.shard is not None:  # one given shard (a CI leg), on a remote executor
        records = _run_jobs(_absolute(spec), [spec.shard], executor, _known(spec, store))
    else:
        records = _run_jobs(_absolute(spec), [f"{k}/{shards}" for k in range(1, shards + 1)], executor,
                            _known(spec, store))
    if store is not None:
        store.record(records, source)
    return records


def _known(spec: RunSpec, store: DurationStore | None) -> dict[str, float]:
    """The durations the split reads: an explicit file (a leg's snapshot) alone, else the store's."""
    if spec.durations is not None:
        return read_test_durations(spec.durations)
    return store.known_for(spec.device) if store is not None else {}


def _with_durations(spec: RunSpec, store: DurationStore | None) -> RunSpec:
    """``spec`` with the durations it splits and orders its files by (runner/execute.py),
    when the store knows any; a leg's explicit snapshot stands."""
    if spec.durations is not None:
        return spec
    known = _known(spec, store)
    if spec.shard is None and not known:
        return spec
    path = spec.out_dir / "work" / DURATIONS_FILE
    write_test_durations(path, known)
    return replace(spec, durations=path)


def _run_jobs(spec: RunSpec, refs: list[str], executor: Executor, known: Mapping[str, float]) -> list[TestRecord]:
    jobs = []
    for ref in refs:
        index, count = (int(x) for x in ref.split("/"))
        shard_spec = replace(spec, out_dir=shard_dir(spec.out_dir, index, count), shard=ref)
        jobs.append(Job(f"shard {ref}", run_shard, ShardJob(shard_spec, dict(known))))
    outputs = executor.run(jobs)
    dirs = []
    for job, output in zip(jobs, outputs):
        folder = job.arg.spec.out_dir
        for name, text in output.files.items():  # the shard may have run on another node
            atomic_write_text(folder / name, text)
        dirs.append(folder)
    return merge_run_dirs(dirs, spec.out_dir)
