"""The processes that run a pytest process's tests for it, forked from its collected session.

plugin/isolate.py says why tests run outside the process that collected them. The processes:

- The **zygote**, forked before the first test; it runs nothing itself. On a request (a JSON
  line in one pipe; its answers, lines, come out of another) it forks:
  - ``{"item", "next", "out", "fault"}``: a **child** that runs one test (``--curate-isolate``),
    writes its reports to ``out`` and ends; the zygote says the child's pid, reaps it and says
    its wait status;
  - ``{"cell", "fault"}``: a **cell**, a child that runs test after test, each on a request over
    the Unix socket at ``cell``, until told its test is its last or it dies
    (``--curate-recycle``); the zygote says its pid and does not wait for it;
  - ``{"reap"}``: not a fork; the wait status of the cell of that pid, once it ended.
- A **cell** answers each test with its reports and with the private memory it holds
  (``Private_Clean`` and ``Private_Dirty`` of ``/proc/self/smaps_rollup``: what it allocated
  and what of its parent's pages it wrote to), read once a second (:data:`MEASURE_EVERY`) or
  sooner when its resident memory grew by :data:`GROWN_MB`: the read walks the process's pages.
  It is the same process from test to test, so module and class fixtures are set up once, as
  in a plain pytest process, and a backward's autograd threads start in it, never in the zygote.

Why cells: a process that runs thousands of tests keeps some of what each leaves behind
(caches, the allocator's pools, leaks). On OpenReg's corpus verification one xdist worker grew
from 528 MB to 4,792 MB over about 4,000 gradient tests, and the run's summed memory stayed
over 4 GB for 35 minutes; the per-test limit (memlimit.py) bounds what one test adds, not what
a process accumulates. A cell that holds more than the limit is told that its next test is its
last (it tears every fixture down after it, as pytest does after a session's last test) and
the next test starts a fresh one, forked from the zygote: the collected session's memory, not
the accumulated one. A cell that dies (a crash, a timeout) ends one test, and the next starts
a new cell: a fork, where an xdist worker's death costs a new worker and a whole collection.

A child and a cell run torch on one intra-op thread, their messages are plain dicts as xdist
serializes reports (pickled: a skip's ``(path, line, reason)`` stays a tuple), and they die with
their parent (``PR_SET_PDEATHSIG``), which dies with the pytest process. Linux only.
"""

from __future__ import annotations

import faulthandler
import gc
import json
import os
import pickle
import select
import signal
import socket
import struct
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import pytest
from _pytest.runner import runtestprotocol

from testcurator.errors import CuratorError
from testcurator.memlimit import MemoryLimit

DIED = "testcurator: the forked process running this test died"
MEASURE_EVERY = 1.0  # seconds between two reads of a cell's private memory (smaps_rollup walks its pages)
GROWN_MB = 16.0  # or sooner, once its resident memory grew by this much (statm: one line, no walk)
CONNECT_TIMEOUT = 60.0  # seconds a new cell has to connect (a fork of a process of a few GB)
_HEADER = struct.Struct("!Q")


class ZygoteGone(CuratorError):
    """The zygote ended while a child or cell of its ran (a process of the plugin's, not a test
    result): the caller runs the test again in its own process."""

    def __init__(self, pid: int) -> None:
        super().__init__(f"the zygote (pid {pid}) that forks the tests' processes ended")
        self.pid = pid


class Zygote:
    """The worker's end of the zygote: requests in one pipe, pids and wait statuses out of another."""

    def __init__(self, pid: int, requests: int, replies: int) -> None:
        self.pid, self._requests, self._replies = pid, requests, replies
        self._buffer = b""
        self.alive = True

    @classmethod
    def start(cls, items: list[pytest.Item]) -> Zygote:
        requests_r, requests_w = os.pipe()
        replies_r, replies_w = os.pipe()
        faulthandler.cancel_dump_traceback_later()  # its watchdog thread would not survive the fork
        # The collected session's objects move to the collector's permanent generation: a
        # collection in the worker, the zygote or a cell would otherwise walk them and write to
        # their pages, which the fork shares until one of them writes (copy on write).
        gc.freeze()
        pid = os.fork()
        if pid == 0:  # the zygote: never returns
            os.close(requests_w)
            os.close(replies_r)
            _serve(items, requests_r, replies_w)
        os.close(requests_r)
        os.close(replies_w)
        return cls(pid, requests_w, replies_r)

    def spawn(self, index: int, next_index: int, out: Path, fault: Path) -> int | None:
        """The pid of the child now running ``items[index]``; None (the zygote is gone)."""
        return self._ask({"item": index, "next": next_index, "out": str(out), "fault": str(fault)})

    def spawn_cell(self, path: Path, fault: Path) -> int | None:
        """The pid of a new cell, which connects to the socket at ``path``; None (the zygote is gone)."""
        return self._ask({"cell": str(path), "fault": str(fault)})

    def reap(self, pid: int) -> int:
        """The wait status of the cell ``pid``, which ended or is ending; ZygoteGone when the
        zygote does not answer (the cell died with it)."""
        status = self._ask({"reap": pid})
        if status is None:
            raise ZygoteGone(self.pid)
        return status

    def wait(self, pid: int, timeout: float | None) -> int | None:
        """A child's wait status; None when it outlived ``timeout`` (then it was killed: first
        SIGABRT, so that its faulthandler writes where it was). ZygoteGone when the zygote
        ended first: the child died with it, status unknown."""
        line = self._line(timeout or None)
        if line is None and self.alive:
            kill(pid)
            self._line(None)  # the zygote reaps it
            return None
        if line is None:
            raise ZygoteGone(self.pid)
        return int(line)

    def _ask(self, request: dict[str, Any]) -> int | None:
        try:
            os.write(self._requests, (json.dumps(request) + "\n").encode())
            line = self._line(None)
        except OSError:
            line = None
        if line is None:
            self.alive = False
            return None
        return int(line)

    def _line(self, timeout: float | None) -> str | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and (left <= 0 or not select.select([self._replies], [], [], left)[0]):
                return None
            chunk = os.read(self._replies, 4096)
            if not chunk:  # the zygote is gone
                self.alive = False
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def close(self) -> None:
        for fd in (self._requests, self._replies):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.waitpid(self.pid, 0)  # it ends at the end of its requests
        except ChildProcessError:
            pass


def _serve(items: list[pytest.Item], requests: int, replies: int) -> None:
    """The zygote's loop (see the module's docstring)."""
    try:
        die_with_parent()
        with os.fdopen(requests, "r", encoding="utf-8") as lines:
            for line in lines:
                req = json.loads(line)
                if "reap" in req:
                    os.write(replies, f"{os.waitpid(req['reap'], 0)[1]}\n".encode())
                    continue
                pid = os.fork()
                if pid == 0 and "cell" in req:
                    # The zygote's pipes are not the cell's: held open by a long-lived cell, they
                    # would hide the zygote's end from the worker.
                    os.close(requests)
                    os.close(replies)
                    _cell(items, Path(req["cell"]), Path(req["fault"]))
                if pid == 0:
                    nextitem = items[req["next"]] if req["next"] >= 0 else None
                    run_child(items[req["item"]], nextitem, Path(req["out"]), Path(req["fault"]))
                os.write(replies, f"{pid}\n".encode())
                if "cell" not in req:
                    os.write(replies, f"{os.waitpid(pid, 0)[1]}\n".encode())
    finally:
        os._exit(0)  # nothing of pytest's: the worker owns the session


def run_child(item: pytest.Item, nextitem: pytest.Item | None, out: Path, fault: Path) -> None:
    code = 1
    try:
        _enter(fault)
        memory = _limit(item.config)
        if memory is not None:
            memory.arm()  # the zygote it was forked from holds none (plugin/events.py arms the worker)
        reports = runtestprotocol(item, log=False, nextitem=nextitem)
        out.write_bytes(pickle.dumps(serialized(item.config, reports)))
        code = 0
    except BaseException:  # a report could not be made: the worker reports the child's end
        traceback.print_exc(file=sys.__stderr__)
    finally:
        os._exit(code)  # no atexit, no session teardown, nothing sent to an xdist controller


def _cell(items: list[pytest.Item], path: Path, fault: Path) -> None:
    code = 1
    try:
        _enter(fault)
        config = items[0].config
        _quiet_xdist(config)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(path))
        measured, held, resident = 0.0, private_mb(), resident_mb()
        while (request := receive(conn, None)) is not None:
            item = items[request["item"]]
            nextitem = items[request["next"]] if request["next"] >= 0 and not request["last"] else None
            memory = _limit(config)
            if memory is not None:
                memory.arm()
            try:
                reports = runtestprotocol(item, log=False, nextitem=nextitem)
            finally:
                if memory is not None:
                    memory.disarm()
            now, grown = time.monotonic(), resident_mb() - resident
            if request["last"] or now - measured >= MEASURE_EVERY or grown >= GROWN_MB:
                measured, held, resident = now, private_mb(), resident + grown
            send(conn, {"reports": serialized(config, reports), "private_mb": held})
            if request["last"]:
                break
        code = 0
    except BaseException:
        traceback.print_exc(file=sys.__stderr__)
    finally:
        os._exit(code)


def _enter(fault: Path) -> None:
    """What a child and a cell do first: die with their parent, one intra-op thread, their
    own fault file (the worker's is read by the runner for the worker's deaths)."""
    die_with_parent()
    torch = sys.modules.get("torch")
    if torch is not None:
        # The intra-op thread pool does not survive a fork: a parallel op in a child of a process
        # that used the pool waits for its threads forever (OpenReg's test_trunc_normal hung; a
        # CPU matmul of 2000x2000 too). One thread: the op runs inline.
        torch.set_num_threads(1)
    faulthandler.enable(file=fault.open("w", encoding="utf-8"), all_threads=True)


def _limit(config: pytest.Config) -> MemoryLimit | None:
    mb = config.getoption("curate_memory_limit", None)
    return MemoryLimit(mb) if mb else None


def _quiet_xdist(config: pytest.Config) -> None:
    """A cell never speaks on its worker's channel to the xdist controller (a warning recorded
    in a test would be sent there, from a process the channel does not know)."""
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor":
            config.pluginmanager.unregister(plugin)


class Cell:
    """The worker's end of a cell: one test at a time over its socket."""

    def __init__(self, pid: int, conn: socket.socket, fault: Path, zygote: Zygote) -> None:
        self.pid, self.conn, self.fault, self.zygote = pid, conn, fault, zygote
        self.private_mb = 0.0
        self.tests = 0
        self.timed_out = False

    @classmethod
    def start(cls, zygote: Zygote, folder: Path, number: int) -> Cell | None:
        """A new cell forked by ``zygote``, connected; None when it could not be started."""
        path, fault = folder / f"cell{number}.sock", folder / f"cell{number}.fault"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(str(path))
            listener.listen(1)
            listener.settimeout(CONNECT_TIMEOUT)
            pid = zygote.spawn_cell(path, fault)
            if pid is None:
                return None
            try:
                conn, _ = listener.accept()
            except OSError:
                kill(pid)
                zygote.reap(pid)
                return None
        path.unlink(missing_ok=True)
        conn.settimeout(None)
        return cls(pid, conn, fault, zygote)

    def run(self, index: int, next_index: int, last: bool, timeout: float | None) -> list[dict[str, Any]] | None:
        """The reports (serialized) of ``items[index]`` run in the cell; None when the cell ended
        without them (:meth:`ended` says how)."""
        try:
            send(self.conn, {"item": index, "next": next_index, "last": last})
            reply = receive(self.conn, timeout or None)
        except TimeoutError:
            kill(self.pid)
            self.timed_out = True
            return None
        except OSError:
            reply = None
        if reply is None:
            return None
        self.tests += 1
        self.private_mb = reply["private_mb"] or 0.0
        return reply["reports"]

    def ended(self) -> tuple[int | None, str]:
        """The ended cell's wait status (None: killed after the timeout) and what its fault
        file holds; ZygoteGone when the zygote is gone too."""
        self.conn.close()
        status = self.zygote.reap(self.pid)
        text = self.fault.read_text(encoding="utf-8", errors="replace") if self.fault.exists() else ""
        self.fault.unlink(missing_ok=True)
        return (None if self.timed_out else status), text

    def close(self) -> None:
        """End a cell that finished its last test, or one the session no longer needs."""
        self.conn.close()  # a cell waiting for its next request reads the end of its socket and exits
        try:
            self.zygote.reap(self.pid)
        except ZygoteGone:
            pass
        self.fault.unlink(missing_ok=True)


def send(conn: socket.socket, message: dict[str, Any]) -> None:
    data = pickle.dumps(message)
    conn.sendall(_HEADER.pack(len(data)) + data)


def receive(conn: socket.socket, timeout: float | None) -> dict[str, Any] | None:
    """The next message; None at the end of the socket; TimeoutError past ``timeout`` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    header = _read(conn, _HEADER.size, deadline)
    if header is None:
        return None
    body = _read(conn, _HEADER.unpack(header)[0], deadline)
    return None if body is None else pickle.loads(body)


def _read(conn: socket.socket, size: int, deadline: float | None) -> bytes | None:
    chunks, left = [], size
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([conn], [], [], wait)[0]:
                raise TimeoutError
        chunk = conn.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def serialized(config: pytest.Config, reports: list[pytest.TestReport]) -> list[dict[str, Any]]:
    """Plain dicts, as xdist sends reports."""
    return [config.hook.pytest_report_to_serializable(config=config, report=report) for report in reports]


def private_mb() -> float | None:
    """This process's private memory in MB (smaps_rollup), or None where /proc does not say."""
    try:
        with open("/proc/self/smaps_rollup", encoding="ascii") as rollup:
            kb = sum(int(line.split()[1]) for line in rollup if line.startswith(("Private_Clean:", "Private_Dirty:")))
    except (OSError, ValueError, IndexError):
        return None
    return kb / 1024


def resident_mb() -> float:
    """This process's resident memory in MB (statm), 0 where /proc does not say."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def kill(pid: int) -> None:
    """SIGABRT first, so that a hung process's faulthandler writes where it was; then SIGKILL."""
    try:
        os.kill(pid, signal.SIGABRT)
        time.sleep(1.0)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def died(item: pytest.Item, status: int | None, fault: str, start: float, stop: float) -> pytest.TestReport:
    """A failed call report for a test whose process died (None: killed after the timeout)."""
    if status is None:
        how = "killed after the per-test timeout"
    elif os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        how = f"signal {signal.Signals(sig).name}" if sig in signal.valid_signals() else f"signal {sig}"
    else:
        how = f"exit code {os.WEXITSTATUS(status)}, no report"
    text = f"{DIED} ({how}) while running {item.nodeid}\n{fault}".rstrip()
    return pytest.TestReport(item.nodeid, item.location, {k: 1 for k in item.keywords}, "failed", text, "call",
                             duration=stop - start, start=start, stop=stop, user_properties=list(item.user_properties))


def report_died(longrepr: Any) -> bool:
    """Whether a report's text is a dead child's or cell's (the runner's crash, not a test failure)."""
    return isinstance(longrepr, str) and longrepr.startswith(DIED)
