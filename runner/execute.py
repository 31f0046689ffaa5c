"""Run a curated (or draft) suite in pytest subprocesses and record every test.

``execute(spec)`` runs pytest with the events plugin (``--curate-events``, and
``--curate-timeout`` as the per-test hang guard), following the event log live for the
progress bar. When a pytest process dies (segfault, abort, SIGKILL, the hang guard's exit)
the test that was running is recorded as ``crashed`` or ``timeout`` and a new process runs
the tests not yet recorded, until every collected test has a record. Under xdist a dead
worker is replaced by xdist itself; the runner still records the crash from the worker's
log and reruns whatever xdist gave up on.

Workers: ``spec.workers`` xdist workers, but one pytest process when the durations the run
was given show a small load (``SERIAL_BELOW_S``): each worker imports torch and collects the
files again, which costs a small tree more than the parallelism saves.

Retries: failing tests (failed, error, crashed, timeout) run again, up to ``spec.retries``
times, in separate invocations; a failure the dispatcher decided (no kernel for the op or the
dtype: ``DETERMINISTIC_CLASSES``) is not retried, it would fail the same way; nor is a test
the pipeline knows to fail on CPU too (``spec.settled``). A test that passes on a retry is *flaky*: its record keeps
the passing outcome, ``flaky=True``, ``failure_class='transient'`` and evidence naming the
first failure. A test that fails every attempt keeps its first classification (consistent).

Outputs in ``spec.out_dir`` (each written atomically): ``results.jsonl`` (one record per
test), ``junit.xml`` (written from the records, so crashes and timeouts appear even though
the pytest that ran them never wrote its own XML), ``manifest.json``; ``work/`` keeps each
invocation's event logs, argsfile, pytest's own JUnit XML and its console log.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from testcurator.plugin.only import write_keys
from testcurator.runner.command import RunSpec, Selection, build_env, pytest_command, select, shard_args, stop_session
from testcurator.runner.eventlog import EventFold, EventTail
from testcurator.runner.results.junit_write import write_junit
from testcurator.runner.manifest import build_manifest, write_manifest
from testcurator.runner.progress import NullProgress, ProgressSink
from testcurator.runner.reconcile import infrastructure_record, invocation_fault, is_infrastructure, pytest_message, unrun_fault
from testcurator.runner.results.records import TestRecord, counts, write_jsonl
from testcurator.sharding import known_load, read_test_durations, slowest_first
from testcurator.vocab import DETERMINISTIC_CLASSES, TestKey

POLL_S = 0.2
# How often a live invocation recounts its records for the progress line (which says a line
# every 8 s): a recount walks every record of the pass, the settled skips included, and at
# each 0.2 s poll it took 40 s of a core from the 2 test workers on the corpus's draft.
REPORT_S = 2.0
RETRY_TESTS_PER_WORKER = 20
# Below this much known test time, and this many known tests, one pytest process runs the
# first pass: each xdist worker imports torch and collects the files again, which on a small
# tree costs more than it saves (a 4-test tree's draft: 9.1 s with two workers, 4.3 s with one).
SERIAL_BELOW_S = 5.0
SERIAL_BELOW_TESTS = 50


@dataclass(frozen=True)
class Invocation:
    """One pytest process the runner started."""

    label: str
    argv: tuple[str, ...]
    returncode: int
    wall_s: float
    log: Path


@dataclass(frozen=True)
class RunResult:
    records: tuple[TestRecord, ...]
    invocations: tuple[Invocation, ...]
    selection: Selection
    out_dir: Path

    @property
    def by_nodeid(self) -> dict[str, TestRecord]:
        return {r.nodeid: r for r in self.records}


class _Pass:
    """Run ``targets`` to completion: one pytest, then one more per process death."""

    def __init__(self, spec: RunSpec, label: str, progress: ProgressSink, env: dict[str, str]) -> None:
        self.spec, self.label, self.progress, self.env = spec, label, progress, env
        self.work = spec.out_dir / "work"
        self.records: dict[str, TestRecord] = {}  # by instance key (testcurator.vocab.instance_key)
        self.known: list[str] = []  # instance keys, in collection order
        self.settled: set[str] = set()  # instance keys of the skips settled at collection
        self.nodeids: dict[str, str] = {}  # instance key -> the node id it was first seen under
        self.generics: dict[str, str] = {}  # instance key -> its generic name (``Class::test``)
        self.rootdir: str | None = None
        self.only: Path | None = None  # the --curate-only list of the next invocation, if any
        self.invocations: list[Invocation] = []
        self._reported_at = 0.0
        self._stale = False  # events came that the progress has not counted yet
        # The last total, with the fold and the sizes it was counted from.
        self._total: tuple[EventFold | None, tuple[int, ...], int | None] = (None, (), None)

    def run(self, targets: Sequence[str], workers: int) -> dict[str, TestRecord]:
        """Records by instance key (node ids may differ between this pass's processes)."""
        self.progress.phase(self.label, None)
        round_no = 0
        while True:
            fold, inv = self._invoke(targets, workers, round_no)
            before = len(self.records)
            dead = fold.dead_records(inv.returncode)
            for nodeid, record in {**fold.finished_records(), **fold.collection_records(), **dead}.items():
                self._add(fold.key(nodeid, record), record)
            self._learn(fold)
            remaining = [k for k in self.known if k not in self.records]
            self._report()
            fault = invocation_fault(inv.returncode, died=bool(dead), collected=fold.selected_known,
                                     finished=fold.reported(), junit=Path(f"{inv.log.with_suffix('')}.junit.xml"),
                                     log=inv.log)
            if fault is None and remaining and len(self.records) == before:
                fault = unrun_fault(remaining, len(self.known), inv.log)
            if fault is not None:
                # pytest did not do its job: retrying the same command would not either.
                self.records[f"<pytest {inv.label}>"] = infrastructure_record(inv.label, fault, pytest_message(inv.log))
                return self.records
            if not remaining:
                return self.records
            targets = self.by_key(remaining, round_no + 1)
            round_no += 1

    def _add(self, key: str, record: TestRecord) -> None:
        # The first process's node id names the instance in every record of the run.
        nodeid = self.nodeids.setdefault(key, record.nodeid)
        if record.generic:
            self.generics.setdefault(key, record.generic)
        self.records[key] = record if record.nodeid == nodeid else replace(record, nodeid=nodeid)

    def _learn(self, fold: EventFold) -> None:
        seen = set(self.known)
        for nodeid in fold.collected:
            key = fold.key(nodeid)
            self.nodeids.setdefault(key, nodeid)
            if key not in seen:
                seen.add(key)
                self.known.append(key)
        for key, generic in fold.generics.items():
            self.generics.setdefault(key, generic)
        self.settled.update(fold.keys.get(n, n) for n in fold.settled)
        self.rootdir = self.rootdir or fold.rootdir

    def by_key(self, keys: Sequence[str], round_no: int) -> list[str]:
        """Targets that run exactly ``keys`` (instance keys): their files, narrowed by a
        ``--curate-only`` list of the keys (each with its generic name, plugin/only.py) that
        the next invocation passes."""
        self.only = write_keys(self.work / f"{self.label}-{round_no}.only", (),
                               Path(self.rootdir) if self.rootdir else None, [(k, self._generic(k)) for k in keys])
        return sorted({self._absolute(TestKey.parse(k).file) for k in keys})

    def _generic(self, key: str) -> str:
        # Without a known generic name the key is the node id: a plain function or class.
        return self.generics.get(key) or TestKey.parse(key).name.partition("[")[0]

    def _absolute(self, nodeid: str) -> str:
        # Node ids are relative to pytest's rootdir; absolute ones work from any cwd.
        return f"{self.rootdir}/{nodeid}" if self.rootdir else nodeid

    def _report(self, fold: EventFold | None = None) -> None:
        self._reported_at, self._stale = time.monotonic(), False
        current = dict(self.records)
        if fold is not None:
            current.update((fold.key(n, r), r) for n, r in fold.finished_records().items())
        settled = self.settled | ({fold.keys.get(n, n) for n in fold.settled} if fold else set())
        self.progress.update(len(current.keys() - settled), counts(current.values()), self._total_of(fold, settled))

    def _total_of(self, fold: EventFold | None, settled: set[str]) -> int | None:
        """The tests this pass will run: what it knows and the fold collected, less the settled
        skips (done before the first test runs: counted as done, they would make the rate and
        the time left a fiction). Counted again only when one of those grew."""
        sizes = (len(self.known), len(settled), len(fold.collected) if fold else 0)
        if self._total[0] is not fold or self._total[1] != sizes:
            # ``known`` holds instance keys, the fold's collection node ids: a later process's node
            # ids count by their keys, or every test of a rerun after a crash counts twice.
            collected = {fold.keys.get(n, n) for n in fold.collected} if fold else set()
            self._total = (fold, sizes, len((set(self.known) | collected) - settled) or None)
        return self._total[2]

    def _invoke(self, targets: Sequence[str], workers: int, round_no: int) -> tuple[EventFold, Invocation]:
        stem = self.work / f"{self.label}-{round_no}"
        events = Path(f"{stem}.events.jsonl")
        argv = pytest_command(self.spec, targets, events=events, junit=Path(f"{stem}.junit.xml"),
                              argsfile=Path(f"{stem}.args"), workers=workers, env=self.env)
        if self.label == "run" and round_no == 0:
            argv += shard_args(self.spec)
        if self.only is not None:  # last: it replaces a --curate-only of the spec's own
            argv.append(f"--curate-only={self.only}")
        log = Path(f"{stem}.log")
        # An invocation of this name that a killed run left (``run --resume`` of an interrupted
        # stage): its workers' event and fault files are appended to, never truncated, and its
        # tests would count as this one's (the holdout's resumed verification: exit 3, "XML cut short").
        for stale in self.work.glob(f"{stem.name}.events.jsonl*"):
            stale.unlink()
        tail, fold = EventTail(events), EventFold()
        started = time.monotonic()
        with log.open("w", encoding="utf-8") as out:
            out.write(" ".join(argv) + "\n")
            out.flush()
            _reap_orphans(self.work)
            proc = subprocess.Popen(argv, cwd=self.spec.cwd, env=self.env, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    preexec_fn=_die_with_parent(os.getpid()))
            pidfile = self.work / f"pytest-{proc.pid}.pid"
            pidfile.write_text(str(proc.pid))
            try:
                while proc.poll() is None:
                    time.sleep(POLL_S)
                    self._drain(tail, fold, live=True)
            except BaseException:
                stop_session(proc)
                raise
        pidfile.unlink(missing_ok=True)
        self._drain(tail, fold)
        inv = Invocation(f"{self.label}-{round_no}", tuple(argv), proc.returncode, time.monotonic() - started, log)
        self.invocations.append(inv)
        return fold, inv

    def _drain(self, tail: EventTail, fold: EventFold, live: bool = False) -> None:
        events = tail.poll()
        for source, event in events:
            fold.feed(source, event)
        # What a throttled poll left uncounted is counted at the next poll past REPORT_S, with
        # or without new events (a long test must not hide the ones that finished before it).
        self._stale = self._stale or bool(events)
        if self._stale and not (live and time.monotonic() - self._reported_at < REPORT_S):
            self._report(fold)


def _die_with_parent(parent: int) -> Callable[[], None] | None:
    """A preexec hook (Linux) that kills pytest when the runner dies, even by SIGKILL.

    pytest gets its own session so that timeouts and crashes take its xdist workers with
    it; the price is that it no longer dies with the runner's process group. The spawning
    thread waits for the child, so the parent-death signal cannot fire early.
    """
    if not sys.platform.startswith("linux"):
        return None

    def hook() -> None:
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
        if os.getppid() != parent:  # the runner died between fork and prctl
            os._exit(1)

    return hook


def _reap_orphans(work: Path) -> None:
    """Kill pytest sessions a killed earlier runner left behind in this work folder.

    Each pytest runs in its own session (so a crash or a timeout kill takes its workers
    with it); when the runner itself is SIGKILLed, that session lives on and would keep
    writing here while a resumed run starts the same stage again.
    """
    for pidfile in work.glob("pytest-*.pid"):
        try:
            os.killpg(int(pidfile.read_text()), signal.SIGKILL)
        except (ProcessLookupError, PermissionError, ValueError):
            pass  # already gone
        pidfile.unlink(missing_ok=True)


def merge_retry(first: dict[str, TestRecord], retry: dict[str, TestRecord], attempt: int) -> dict[str, TestRecord]:
    """Fold one retry round into the records, both by instance key (see module docstring for
    the rule)."""
    merged = dict(first)
    for key, new in retry.items():
        if is_infrastructure(new):  # the retry's pytest failed: that is news, not a test result
            merged[key] = new
            continue
        old = first.get(key)
        if old is None or not old.is_failure or old.flaky:
            continue
        if new.is_failure:
            merged[key] = replace(old, attempts=attempt)
        else:
            evidence = f"{new.outcome} on attempt {attempt} after failing: [{old.failure_class}] {old.evidence}"
            merged[key] = replace(new, nodeid=old.nodeid, attempts=attempt, flaky=True, failure_class="transient",
                                     evidence=evidence, failure_text=old.failure_text)
    return merged


def execute(spec: RunSpec, progress: ProgressSink | None = None) -> RunResult:
    """Run the selection, retry failures, write results.jsonl, junit.xml and manifest.json."""
    progress = progress or NullProgress()
    # pytest runs in spec.cwd: a relative --out would name files it cannot find.
    spec = replace(spec, out_dir=spec.out_dir.resolve())
    selection = select(spec)
    env = build_env(spec)
    spec.out_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    invocations: list[Invocation] = []
    with progress:
        first = _Pass(spec, "run", progress, env)
        known = read_test_durations(spec.durations) if spec.durations is not None else {}
        targets = slowest_first(selection.targets, known, spec.cwd)
        records = first.run(targets, _first_workers(spec, targets, known))
        invocations += first.invocations
        for attempt in range(2, spec.retries + 2):
            # A missing kernel fails the same way every time: retrying thousands of them (a young
            # backend on the real corpus: 8,189 of 10,000 failures) only doubled the draft.
            failing = [k for k, r in records.items() if r.is_failure and not r.flaky and TestKey.parse(k).test
                       and r.failure_class not in DETERMINISTIC_CLASSES and not _settled(spec, k, r)]
            if not failing:
                break
            retry = _Pass(spec, f"retry{attempt - 1}", progress, env)
            retry.rootdir, retry.nodeids, retry.generics = first.rootdir, first.nodeids, first.generics
            # xdist start-up costs more than it saves on a handful of reruns.
            workers = min(spec.workers, max(1, len(failing) // RETRY_TESTS_PER_WORKER))
            retried = retry.run(retry.by_key(failing, 0), workers)
            invocations += retry.invocations
            records = merge_retry(records, retried, attempt)
        progress.phase("merging", None)  # results, JUnit XML and manifest from every pass
        ordered = tuple(records[n] for n in _order(first.known, records))
        write_jsonl(spec.out_dir / "results.jsonl", ordered)
        write_junit(spec.out_dir / "junit.xml", ordered)
        manifest = build_manifest(spec, selection, ordered, [list(i.argv) for i in invocations], started, time.time())
        write_manifest(spec.out_dir / "manifest.json", manifest)
    return RunResult(ordered, tuple(invocations), selection, spec.out_dir)


def _first_workers(spec: RunSpec, targets: Sequence[str], known: dict[str, float]) -> int:
    """``spec.workers``, or one when the durations the run was given show a small load (a
    shard keeps its workers: its targets are the whole run's)."""
    load = known_load(targets, known, spec.cwd) if spec.workers > 1 and spec.shard is None else None
    return 1 if load is not None and load[0] < SERIAL_BELOW_S and load[1] < SERIAL_BELOW_TESTS else spec.workers


def _settled(spec: RunSpec, key: str, record: TestRecord) -> bool:
    """Whether the pipeline knows ``record``'s test to fail on CPU too (``spec.settled``)."""
    return bool(spec.settled) and str(TestKey.of(TestKey.parse(key).file, record.generic or "")) in spec.settled


def _order(known: Sequence[str], records: dict[str, TestRecord]) -> list[str]:
    seen = set(known)
    return [n for n in known if n in records] + [n for n in records if n not in seen]
