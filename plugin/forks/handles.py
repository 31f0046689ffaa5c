"""The pytest process's end of the processes forked from its collected session (the package's
docstring says what each is for): the zygote, a cell, and the report of a test whose
process died."""

from __future__ import annotations

import faulthandler
import gc
import json
import os
import select
import signal
import socket
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from testcurator.errors import CuratorError
from testcurator.plugin.forks.serve import receive, send, serve

DIED = "testcurator: the forked process running this test died"
CONNECT_TIMEOUT = 60.0  # seconds a new cell has to connect (a fork of a process of a few GB)


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
            serve(items, requests_r, replies_w)
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


def kill(pid: int) -> None:
    """SIGABRT first, so that a hung process's faulthandler writes where it was; then SIGKILL."""
    try:
        os.kill(pid, signal.SIGABRT)
        time.sleep(1.0)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def died(item: pytest.Item, status: int | None, fault: str, start: float, stop: float,
         timeout: float | None) -> pytest.TestReport:
    """A failed call report for a test whose process died (None: killed after ``timeout``;
    then the text starts as the hang guard's does, for the same outcome, ``timeout``)."""
    if status is None:
        how = "killed after the per-test timeout"
        fault = f"Timeout ({timedelta(seconds=int(timeout or 0))})!\n{fault}"
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
