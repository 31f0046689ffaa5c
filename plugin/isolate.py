"""``--curate-isolate DTYPE[,DTYPE...]``: run each test of those dtypes in a forked process;
``--curate-recycle MB``: run the others in a cell, replaced once it holds more than MB.

A test that kills its process (a segfault in the backend) takes its pytest process with it:
under xdist the worker is replaced and the replacement collects the whole selection again
(about a minute for 37,000 instances on 2 cores), and every crash pays it. On OpenReg the
probe found ``aten::_conj`` (complex128) and ``aten::_neg_view`` (float64) killing the
process, and about half of the gradient files' complex instances make such a call: a draft
of the whole corpus would have paid that minute a thousand times. The pipeline therefore
names the dtypes of the calls its probe saw crash, and each instance of them (an instance of
a dtype pair counts by either member) runs in a child forked from the process that collected
it: a crash ends the child, and is reported as one for that test; the process goes on.

The children are not forked from the process that runs the other tests, but from a zygote
that process forks before its first test (``pytest_runtestloop``) and that runs nothing
itself: a process whose autograd engine started its device threads (any backward on a
device, OpenReg's included) marks every child forked after it, and each backward there fails
with "Unable to handle autograd's threading in combination with fork-based multiprocessing"
(785 of the first 2,100 tests of OpenReg's corpus draft, all of them false failures). So an
isolated test sees the session as collected, before any test ran, and sets up its module and
class fixtures itself. Should the zygote be gone, a child is forked from the process itself
(a test whose zygote ended under it runs again so: its death was not the test's doing).
After a child, the process tears its own fixtures down to the next test's, as pytest does
after each test (else the next test it runs itself finds "previous item was not torn down").

The child runs pytest's own per-test protocol (setup, call, teardown) without reporting, and
sends its reports back serialized as xdist sends them (``pytest_report_to_serializable``: plain
dicts, pickled into a file of the parent's);
the parent reports them as its own, so the event log, JUnit XML and an xdist controller see
an ordinary test. A child that dies leaves a failed ``call`` report whose text starts with
:data:`~testcurator.plugin.forks.handles.DIED` (the runner records it as ``crashed``, runner/eventlog.py) and carries the
child's faulthandler output. The child dies with its parent (a hung test under the per-test
timeout: the parent's faulthandler exits it, see events.py). Fixtures a child sets up live
and end in the child: a class fixture is set up again in the next child or in the parent. A
child runs torch on one intra-op thread (the parent's thread pool is not in the child).
Linux (``os.fork``) only; elsewhere the option runs tests as usual.

``--curate-isolate-except FILE`` names (tier keys, core/tiers.py) the instances of those
dtypes that run in the process all the same, and ``--curate-isolate-also FILE`` those forked
whatever their dtype: the pipeline lists the instances whose captured calls are known and
include no call of an op the probe saw crash, and those whose calls include one
(pipelines/nightly/isolation.py). On OpenReg a fork and its wait cost about 37 ms a test:
201 s of a 777 s run of 12 upstream files, where two thirds of the forked tests made no such
call; and upstream test_nonzero's int8 instance, of a dtype no crashing call had, killed its
worker, whose replacement collected the files again.

``--curate-recycle MB``: every test that is not isolated runs in a *cell*, a process the zygote
forks that runs test after test (plugin/forks/): the process that collected runs none, and a
cell that holds more than MB of its own memory after a test runs one more (its last, which
tears every fixture down) and is replaced by a fresh fork of the collected session at the next.
What thousands of tests leave behind in a process is let go every so often, and a crash in a
cell ends one test and costs a fork. Without a zygote (it ended) tests run in this process.
The processes themselves, and the measurements behind them, are in plugin/forks/.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import select
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from _pytest.runner import runtestprotocol

from testcurator.names import split_dtypes
from testcurator.plugin.forks.handles import Cell, Zygote, ZygoteGone, died, kill
from testcurator.plugin.forks.serve import run_child, teardown_to
from testcurator.plugin.identity import IDENTITY_KEY, item_identity
from testcurator.plugin.optionset import existing_file, first_time, positive_mb
from testcurator.tiers import tier_key

PLUGIN_NAME = "testcurator-isolate"


def add_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    if not first_time(parser, "isolate"):
        return
    group.addoption("--curate-isolate", dest="curate_isolate", default=None, metavar="DTYPE[,DTYPE...]",
                    type=lambda v: frozenset(d.strip() for d in v.split(",") if d.strip()),
                    help="run each test of these dtypes in a forked process of its own, so that a crash ends "
                         "only that test ('all': every test)")
    group.addoption("--curate-isolate-except", dest="curate_isolate_except", type=existing_file("instance list"),
                    default=None, metavar="FILE",
                    help="with --curate-isolate: the instances FILE names (tier keys, one a line) run in this "
                         "process all the same (their calls are known, and none is of an op seen to crash)")
    group.addoption("--curate-isolate-also", dest="curate_isolate_also", type=existing_file("instance list"),
                    default=None, metavar="FILE",
                    help="with --curate-isolate: the instances FILE names (tier keys, one a line) run in a forked "
                         "process whatever their dtype (they call an op seen to crash)")
    group.addoption("--curate-recycle", dest="curate_recycle", type=positive_mb, default=None, metavar="MB",
                    help="run the tests that are not isolated in a process forked from the collected session, "
                         "replaced by a fresh one once it holds more than MB of its own (plugin/forks/)")


def configure(config: pytest.Config) -> None:
    dtypes = config.getoption("curate_isolate", None) or frozenset()
    recycle = config.getoption("curate_recycle", None)
    if not (dtypes or recycle) or not hasattr(os, "fork") or config.pluginmanager.has_plugin(PLUGIN_NAME):
        return
    known, also = (_keys(config.getoption(name, None)) for name in ("curate_isolate_except", "curate_isolate_also"))
    config.pluginmanager.register(IsolatePlugin(dtypes, known, also, recycle), PLUGIN_NAME)


def _keys(path: Path | None) -> frozenset[str]:
    return frozenset(path.read_text(encoding="utf-8").splitlines()) if path is not None else frozenset()


class IsolatePlugin:
    def __init__(self, dtypes: frozenset[str], known: frozenset[str] = frozenset(),
                 also: frozenset[str] = frozenset(), recycle_mb: float | None = None) -> None:
        self.dtypes = dtypes
        self.known = known  # tier keys of the instances that run in this process whatever their dtype
        self.also = also  # tier keys of those that are forked whatever their dtype
        self.recycle_mb = recycle_mb  # the others run in a cell, replaced past this private memory
        self._zygote: Zygote | None = None
        self._index: dict[int, int] = {}  # id(item) -> its place in session.items (the zygote's copy)
        self._cell: Cell | None = None
        self._cells = 0  # cells started
        self._folder: Path | None = None  # the cells' sockets and fault files

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        if not session.config.option.collectonly and session.items and \
                (self.recycle_mb or any(self.wanted(item) for item in session.items)):
            self._index = {id(item): k for k, item in enumerate(session.items)}
            self._folder = Path(tempfile.mkdtemp(prefix="curate-cells-"))  # short: a socket's path has 108 bytes
            self._zygote = Zygote.start(session.items)
        try:
            return (yield)
        finally:
            if self._cell is not None:
                self._cell.close()
                self._cell = None
            if self._zygote is not None:
                self._zygote.close()
                self._zygote = None
            if self._folder is not None:
                shutil.rmtree(self._folder, ignore_errors=True)

    def wanted(self, item: pytest.Item) -> bool:
        if "all" in self.dtypes:
            return True
        ident = item.stash.get(IDENTITY_KEY, None) or item_identity(item)
        key = tier_key(item.nodeid.split("::", 1)[0], ident.generic, ident.op, ident.dtype, ident.module) \
            if self.known or self.also else ""
        if key in self.also:
            return True
        return any(d in self.dtypes for d in split_dtypes(ident.dtype)) and key not in self.known

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        isolated = self.wanted(item)
        cell = None if isolated or not self.recycle_mb else self._ready_cell()
        if not isolated and cell is None:
            return None  # run here, as pytest runs it
        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        timeout = item.config.getoption("curate_timeout", None)
        zygote = self._zygote if self._zygote is not None and self._zygote.alive else None
        where = (zygote, self._index[id(item)], self._index[id(nextitem)] if nextitem is not None else -1) \
            if zygote is not None and id(item) in self._index else None
        reports = self._in_cell(cell, item, nextitem, timeout) if cell is not None else run_forked(item, nextitem, timeout, where)
        torn = teardown_to(item, nextitem)
        if torn is not None:  # a fixture of this process failed its teardown: this test's teardown says so
            reports = [r for r in reports if r.when != "teardown" or r.failed] + [torn]
        for report in reports:
            ihook.pytest_runtest_logreport(report=report)
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True

    def _ready_cell(self) -> Cell | None:
        """The cell that runs the next test: the current one, or a new one forked by the
        zygote; None when there is no zygote, or a cell could not be started (this and every
        later test runs in this process: a cell that does not connect costs a minute's wait)."""
        if self._cell is None and self._zygote is not None and self._zygote.alive and self._folder is not None:
            self._cells += 1
            self._cell = Cell.start(self._zygote, self._folder, self._cells)
            if self._cell is None:
                self.recycle_mb = None
        return self._cell

    def _in_cell(self, cell: Cell, item: pytest.Item, nextitem: pytest.Item | None,
                 timeout: float | None) -> list[pytest.TestReport]:
        """The test's reports from the cell, or its death's; a cell past the limit is told that
        this test is its last, and one that ended is replaced at the next test."""
        config = item.config
        faulthandler.cancel_dump_traceback_later()  # the guard is the wait's own timeout (run_forked says why)
        last = nextitem is None or cell.private_mb > (self.recycle_mb or 0)
        next_index = self._index[id(nextitem)] if nextitem is not None and id(nextitem) in self._index else -1
        start = time.time()
        data = cell.run(self._index[id(item)], next_index, last, timeout)
        if data is not None:
            if last:
                cell.close()
                self._cell = None
            return [config.hook.pytest_report_from_serializable(config=config, data=d) for d in data]
        self._cell = None
        try:
            status, text = cell.ended()
        except ZygoteGone:  # it died with the zygote, not of the test: run it here
            return runtestprotocol(item, log=False, nextitem=nextitem)
        return [died(item, status, text, start, time.time(), timeout)]


def run_forked(item: pytest.Item, nextitem: pytest.Item | None, timeout: float | None,
               zygote: tuple[Zygote, int, int] | None = None) -> list[pytest.TestReport]:
    """The test's reports from a forked child, or one crash (or timeout) report if it died;
    with ``zygote`` (the zygote, the item's and the next item's index) the zygote forks it."""
    config = item.config
    # The per-test hang guard's watchdog is a thread, and a thread does not survive a fork: a
    # child that cancels it (pytest's faulthandler plugin does, on every failure) waits for
    # that thread forever. Cancelled here, the guard is this wait's own timeout instead.
    faulthandler.cancel_dump_traceback_later()
    with tempfile.TemporaryDirectory(prefix="curate-isolate-") as tmp:
        out, fault = Path(tmp, "reports.pickle"), Path(tmp, "fault")
        start = time.time()
        try:
            status = _through(zygote, out, fault, timeout) if zygote is not None else _fork_here(item, nextitem, out, fault, timeout)
        except ZygoteGone:
            # Not the test's doing: run it again, forked from here (as every later isolated
            # test is now), rather than report a death it did not cause.
            out.unlink(missing_ok=True)
            fault.unlink(missing_ok=True)
            start = time.time()
            status = _fork_here(item, nextitem, out, fault, timeout)
        stop = time.time()
        data = pickle.loads(out.read_bytes()) if out.exists() else []
        reports = [config.hook.pytest_report_from_serializable(config=config, data=d) for d in data]
        if status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and any(r.when == "teardown" for r in reports):
            return reports
        text = fault.read_text(encoding="utf-8", errors="replace") if fault.exists() else ""
        return [*[r for r in reports if r.when == "setup" and r.passed], died(item, status, text, start, stop, timeout)]


def _through(zygote: tuple[Zygote, int, int], out: Path, fault: Path, timeout: float | None) -> int | None:
    """The wait status of the test's child forked by the zygote (None: timed out); ZygoteGone
    when the zygote does not answer or ends before the child."""
    process, index, next_index = zygote
    pid = process.spawn(index, next_index, out, fault)
    if pid is None:
        raise ZygoteGone(process.pid)
    return process.wait(pid, timeout)


def _fork_here(item: pytest.Item, nextitem: pytest.Item | None, out: Path, fault: Path, timeout: float | None) -> int | None:
    """The wait status of the test's child forked from this process (None: timed out)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        run_child(item, nextitem, out, fault)
    return _wait(pid, timeout)


def _wait(pid: int, timeout: float | None) -> int | None:
    """The child's wait status; None when it outlived ``timeout`` (then it was killed: first
    SIGABRT, so that its faulthandler writes where it was)."""
    if not timeout:
        return os.waitpid(pid, 0)[1]
    deadline = time.monotonic() + timeout
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux 5.3+: poll
        fd = None
    if fd is not None:
        try:
            if select.select([fd], [], [], timeout)[0]:
                return os.waitpid(pid, 0)[1]
        finally:
            os.close(fd)
    else:
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            time.sleep(0.005)
    kill(pid)
    os.waitpid(pid, 0)
    return None


