"""What runs in the processes forked from the collected session: the zygote's loop, one test's
child, a cell's loop; their messages (pickled dicts, length first) and memory readings.
The package's docstring says what each process is for."""

from __future__ import annotations

import faulthandler
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
from _pytest.runner import CallInfo, runtestprotocol

from testcurator.memlimit import MemoryLimit

MEASURE_EVERY = 1.0  # seconds between two reads of a cell's private memory (smaps_rollup walks its pages: 13 ms at 900 MB)
GROWN_MB = 16.0  # or sooner, once its resident memory grew by this much (statm: one line, no walk)
_HEADER = struct.Struct("!Q")


def serve(items: list[pytest.Item], requests: int, replies: int) -> None:
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
                    run_cell(items, Path(req["cell"]), Path(req["fault"]))
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


def teardown_to(item: pytest.Item, target: pytest.Item | None) -> pytest.TestReport | None:
    """Tear this process's fixtures down to ``target``'s (None: all of them), as pytest's own
    teardown phase would have; ``item``'s failed teardown report, or None."""
    call = CallInfo.from_call(lambda: item.session._setupstate.teardown_exact(target), when="teardown")
    if call.excinfo is None:
        return None
    return pytest.TestReport.from_item_and_call(item, call)


def run_cell(items: list[pytest.Item], path: Path, fault: Path) -> None:
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
            # The tests since this cell's last ran elsewhere (isolated, in forks): its fixtures
            # were torn down to the next of those, so tear them down to this one's, else its
            # setup finds them ("previous item was not torn down properly").
            torn = teardown_to(item, item)
            memory = _limit(config)
            if memory is not None:
                memory.arm()
            try:
                reports = runtestprotocol(item, log=False, nextitem=nextitem)
            finally:
                if memory is not None:
                    memory.disarm()
            if torn is not None:  # a fixture of an earlier test failed its teardown: this test's says so
                reports = [r for r in reports if r.when != "teardown"] + [torn]
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


def die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
