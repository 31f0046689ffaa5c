"""The CPU op capture as shards on the run's executor, with each test's duration recorded.

The capture runs the kept tests once on CPU under the op-recording TorchDispatchMode
(``--curate-capture-ops``). Here it is split like every heavy step, into N jobs on the
local executor or on Ray, but the split happens here, before any collection: a capture
runs every collected instance (no config skips any), so there is nothing the collection
would tell the split. Each job gets its own targets, balanced by the durations recorded so
far (:func:`plan_targets`): whole files for a full capture (a job imports and collects
only its files, instead of every job collecting the whole tree and keeping 1/N), exact
node ids for a delta (``testcurator upgrade``: only the changed tests' instances, from the
static map) or whole files with a selection (``extra``). Targets reach pytest through an ``@argsfile`` (no OS argument limit). A
capture shard runs on the reference device, so on Ray it asks for CPUs only. A one-shard
capture on the local executor may run in a pytest started ahead (``runner/warm.py``:
an upgrade starts it while it compares the trees).

Test failures are evidence, not errors, and so is a pytest that dies part way (a test
that segfaults on CPU): what it wrote is kept. A shard whose pytest did not do its job
(usage or internal error, interrupt, no selection, tests selected but not run:
``runner/reconcile.py``) failed as infrastructure, and is retried by the executor.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from testcurator.errors import ExecutionError
from testcurator.runner.command import pytest_argv, reference_env, run_bounded, tree_options
from testcurator.runner.shards.durations import DurationStore
from testcurator.runner.eventlog import EventFold, EventTail
from testcurator.runner.shards.executors import Executor, Job
from testcurator.runner.reconcile import PYTEST_FAULTS, PYTEST_FINISHED, pass_fault
from testcurator.runner.results.records import TestRecord
from testcurator.runner.warm import WarmPytest
from testcurator.sharding import file_of, least_duration, slowest_first

CAPTURE_TIMEOUT = 120.0
# Workers xdist may replace in one capture before it stops scheduling (its default: 4 per worker).
# Each test the capture's timeout kills takes its worker: holdout test_modules' float64 gradchecks
# killed 10, and xdist left the file's last 272 kept instances unrun, night after night. The
# device's and the CPU's collections ran before, so a collection that crashes every worker
# does not get here; 100 deaths cost more than any budget (each at least its 120 s timeout).
CAPTURE_MAX_RESTARTS = 100


@dataclass(frozen=True)
class CaptureJob:
    torch_root: Path
    targets: tuple[str, ...]  # files or node ids, relative to torch_root
    work: Path
    label: str
    workers: int = 1
    extra: tuple[str, ...] = ()  # more pytest options (a delta's selection)
    timeout: float = CAPTURE_TIMEOUT
    limit_s: float | None = None  # the pytest is stopped after this many seconds (the capture's limit)
    # A pytest started ahead, used when it fits (local executor only: it is not picklable).
    warm: WarmPytest | None = field(default=None, compare=False)


@dataclass(frozen=True)
class CaptureOutput:
    captured: str  # the capture's JSON lines
    records: tuple[TestRecord, ...]  # outcome and duration of each test
    # Files that did not import (relative to the torch root) -> pytest's collection error.
    collect_errors: tuple[tuple[str, str], ...] = ()
    died: tuple[str, ...] = ()  # tests whose process died under them (the capture's timeout, a crash)
    stopped: tuple[str, ...] = ()  # tests it never ran: the pytest was stopped at the job's limit


def capture_shard(job: CaptureJob) -> CaptureOutput:
    """The job body: one pytest over ``job.targets`` on CPU."""
    if job.work.exists():
        shutil.rmtree(job.work)  # a retried shard starts over
    job.work.mkdir(parents=True)
    part, events = job.work / "captured.jsonl", job.work / "events.jsonl"
    # One upstream file that does not import must not stop the capture of all the others.
    # --tb=no: a capture keeps outcomes, not failure texts, and on a generated PyTorch-size
    # tree (most tests failing) formatting and printing tracebacks was most of the pytest's
    # time: 2x the CPU of a run, and minutes of printing after its last test.
    # --assert=plain: pytest's assertion rewriting re-parses and recompiles every test module
    # in every pytest (its cache would write into the upstream tree); outcomes are the same,
    # and at 90 generated files it was a quarter of a delta capture's time.
    cmd = pytest_argv("-q", "--tb=no", "--assert=plain", "--continue-on-collection-errors",
                      f"--curate-capture-ops={part}",
                      f"--curate-timeout={job.timeout}", f"--curate-events={events}")
    if job.workers > 1:
        cmd += ["-n", str(job.workers), f"--max-worker-restart={CAPTURE_MAX_RESTARTS}"]
    argsfile = job.work / "targets.args"
    argsfile.write_text("".join(f"{t}\n" for t in job.targets), encoding="utf-8")
    argv = [*cmd, *tree_options(job.torch_root, job.work), *job.extra, f"@{argsfile}"]
    env, log = reference_env(), job.work / "capture.log"
    if job.warm is not None and job.warm.fits(argv, job.torch_root, env):
        returncode, stopped = job.warm.run(argv, log), False
    else:
        returncode, stopped = run_bounded(argv, cwd=job.torch_root, env=env, log=log, limit_s=job.limit_s)
    parts = sorted(job.work.glob(part.name + "*"))
    scan = scan_events(events)
    if not stopped and not scan.clean(returncode):
        # Something is off (a test died, pytest stopped early): the runner's full fold says
        # what, exactly as for any other pass. A clean pass needs only the scan.
        fold = EventFold()
        for source, event in EventTail(events).poll():
            fold.feed(source, event)
        fault = pass_fault(returncode, fold, job.work / "capture.log")
        if fault is not None:  # pytest itself failing is not evidence of anything
            raise ExecutionError(f"{job.label}: {fault}")
    rootdir = Path(scan.rootdir) if scan.rootdir else job.torch_root
    errors = tuple((Path(os.path.relpath(rootdir / nodeid, job.torch_root)).as_posix(), text)
                   for nodeid, text in scan.collect_errors.items() if nodeid)
    return CaptureOutput(_read_parts(parts), scan.records, errors, scan.died, scan.unstarted if stopped else ())


def _read_parts(parts: Sequence[Path]) -> str:
    return "".join(p.read_text(encoding="utf-8") for p in parts)


def shard_output(parts: Sequence[Path], events: Path) -> CaptureOutput:
    """What a capture job sends back once its pytest ended: the capture lines, and each
    finished test's outcome and duration from the event log (bench/scale.py times this)."""
    return CaptureOutput(_read_parts(parts), scan_events(events).records)


@dataclass(frozen=True)
class EventScan:
    """One read of a capture pytest's event logs: each finished test's outcome and duration,
    and what tells a clean pass (every collected test finished or failed to collect, none
    left started) from one the runner's :func:`pass_fault` must look at."""

    records: tuple[TestRecord, ...]
    selected_known: bool
    unrun: bool  # a collected test neither finished nor failed to collect
    died: tuple[str, ...] = ()  # the tests that started and never finished (their process died under them)
    unstarted: tuple[str, ...] = ()  # collected tests that never started (nor failed to collect)
    collect_errors: Mapping[str, str] = field(default_factory=dict)  # node id (a file) -> error text
    rootdir: str | None = None  # pytest's rootdir, which collection error node ids are relative to

    def clean(self, returncode: int) -> bool:
        return (returncode in PYTEST_FINISHED and returncode not in PYTEST_FAULTS and self.selected_known
                and not self.died and not self.unrun)


def scan_events(events: Path) -> EventScan:
    """Fold the event logs of one pytest (and its xdist workers) in one pass.

    Not the runner's EventFold: a capture keeps no failure texts, and classifying them
    (then reading the logs a second time for the durations) was most of the driver's time
    after a large capture's tests. Outcome here is what the durations store needs
    (skipped or not), as it was.
    """
    seconds: dict[str, float] = {}
    outcome: dict[str, str] = {}
    device: dict[str, str | None] = {}
    finished: dict[str, None] = {}
    collected: list[str] = []
    errors: dict[str, str] = {}
    rootdir: str | None = None
    selected = False
    decode = json.JSONDecoder().raw_decode  # json.loads' checks and wrapping, per line, were a third of it
    for path in EventTail(events).files():
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if not line.endswith("\n"):
                    break  # a line cut by the process dying
                if not line.strip():
                    continue
                event = decode(line)[0]
                kind, nodeid = event.get("event"), event.get("nodeid", "")
                if kind == "report":
                    if nodeid in seconds and event.get("when") != "???":
                        seconds[nodeid] += float(event.get("duration") or 0.0)
                        if event.get("outcome", "passed") != "passed" and outcome[nodeid] == "passed":
                            outcome[nodeid] = event["outcome"]
                elif kind == "start":
                    device[nodeid] = (event.get("identity") or {}).get("device")
                    seconds[nodeid], outcome[nodeid] = 0.0, "passed"
                    finished.pop(nodeid, None)  # a retried test starts again; its latest run counts
                elif kind == "finish" and nodeid in seconds:
                    finished[nodeid] = None
                elif kind == "collected":
                    selected = True
                    rootdir = rootdir or event.get("rootdir")
                    collected.extend(event["nodeids"])
                elif kind == "collect_error":
                    errors[nodeid] = event.get("longrepr") or ""
    records = tuple(TestRecord(n, outcome[n], device=device[n], duration=seconds[n]) for n in finished)
    return EventScan(records, selected, died=tuple(n for n in seconds if n not in finished),
                     unrun=any(n not in finished and n not in errors for n in collected),
                     unstarted=tuple(n for n in collected if n not in seconds and n not in errors),
                     collect_errors=errors, rootdir=rootdir)


def _weights(targets: Sequence[str], known: Mapping[str, float]) -> dict[str, float]:
    """Expected seconds per target: a node id's own duration, a file's total; an unknown
    one weighs the median of the known ones of its kind (never zero)."""
    per_file: dict[str, float] = {}
    for nodeid, seconds in known.items():
        per_file[file_of(nodeid)] = per_file.get(file_of(nodeid), 0.0) + seconds
    own = {t: (known.get(t) if "::" in t else per_file.get(t)) for t in targets}
    out: dict[str, float] = {}
    for is_node in (True, False):
        kind = [t for t in targets if ("::" in t) == is_node]
        values = sorted(v for t in kind if (v := own[t]) is not None)
        fallback = values[len(values) // 2] if values else 1.0
        out.update({t: max(own[t] or fallback, 0.001) for t in kind})
    return out


def plan_targets(targets: Sequence[str], known: Mapping[str, float], shards: int) -> list[tuple[str, ...]]:
    """At most ``shards`` non-empty lists of ``targets`` (files or node ids), balanced by
    expected duration with pytest-split's least_duration; deterministic, each list's files with
    the slowest known test first (core/sharding.py ``slowest_first``), else in the given order."""
    unique = list(dict.fromkeys(targets))
    groups, _ = least_duration(unique, _weights(unique, known), max(1, min(shards, len(unique))))
    return [tuple(slowest_first([unique[i] for i in sorted(g)], known)) for g in groups if g]


def run_capture(
    torch_root: Path, targets: Sequence[str], out: Path, work: Path, *, state_dir: Path, executor: Executor,
    shards: int = 1, workers: int = 1, extra: Sequence[str] = (), collect_errors: dict[str, str] | None = None,
    warm: WarmPytest | None = None, died: set[str] | None = None, limit_s: float | None = None,
    stopped: set[str] | None = None,
) -> bool:
    """Capture ``targets`` (files or exact node ids) into ``out`` (JSON lines); False when
    nothing was captured. ``extra``: pytest options every job gets. ``collect_errors``, when
    given, receives the files that did not import (file -> pytest's error text). ``warm``: a
    pytest started ahead that a single local job runs in when it fits. ``died``, when given,
    receives the node ids of the tests whose process died under them. ``limit_s``: each job's
    pytest is stopped after that many seconds; ``stopped``, when given, receives the node ids
    of the tests a stopped pytest never ran.

    The reference device is the CPU: give an executor whose jobs ask for no device."""
    with DurationStore(state_dir) as store:
        known = store.known_for("cpu")
        plan = plan_targets(targets, known, shards)
        warm = warm if len(plan) == 1 and executor.name == "local" else None
        jobs = [Job(label, capture_shard, CaptureJob(torch_root, part, work / f"{k}-of-{len(plan)}", label, workers,
                                                    tuple(extra), limit_s=limit_s, warm=warm))
                for k, part in enumerate(plan, start=1)
                for label in [f"capture shard {k}/{len(plan)}" if len(plan) > 1 else "op capture"]]
        outputs = executor.run(jobs)
        store.record([r for o in outputs for r in o.records], "capture")
    if collect_errors is not None:
        collect_errors.update(error for o in outputs for error in o.collect_errors)
    if died is not None:
        died.update(n for o in outputs for n in o.died)
    if stopped is not None:
        stopped.update(n for o in outputs for n in o.stopped)
    text = "".join(o.captured for o in outputs)
    if not text:
        return False
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    return True
