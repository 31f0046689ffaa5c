"""One run at a time per state directory and per ``--out``: a lock file that names its holder.

A cron nightly that overlaps a manual run is common. Two runs writing one state directory
(checkpoints, memory, history) or one ``--out`` (configs, report) would interleave their
writes, so every command that writes them holds :func:`hold` on both first.

The lock is ``flock`` on a file (``<state-dir>/run.lock``, ``<out>/.testcurator.lock``): the
kernel drops it when its holder dies, however it dies, so a killed run never blocks the
next one. The file also says who holds it (pid, start time, command, host) while it is held
and is emptied on a clean release: a run that takes a lock whose file still names someone
knows that run was killed, and says so (its run can be continued with ``--resume``).

A run that finds the lock held waits up to ``wait_s`` seconds (0: not at all), then refuses
with :class:`BusyError` naming the holder; it has written nothing by then.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from testcurator.errors import CuratorError

STATE_LOCK = "run.lock"
OUT_LOCK = ".testcurator.lock"
_POLL_S = 0.5
_SAY_EVERY_S = 10.0


class BusyError(CuratorError):
    """Another run holds a lock this run needs; nothing was written. Exit 3: the run could
    not do its job, as with any infrastructure failure (CI retries it once)."""

    exit_code = 3


@dataclass(frozen=True)
class Holder:
    """Who holds (or, in a stale file, held) a lock."""

    pid: int
    started: str
    command: str
    host: str

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, started {self.started}: {self.command}"

    @classmethod
    def read(cls, text: str) -> Holder | None:
        try:
            data: Any = json.loads(text)
            return cls(int(data["pid"]), str(data["started"]), str(data["command"]), str(data["host"]))
        except (ValueError, KeyError, TypeError):
            return None  # empty (released cleanly) or cut by a concurrent write


def _me(command: str) -> Holder:
    return Holder(os.getpid(), datetime.now(timezone.utc).isoformat(timespec="seconds"), command,
                  socket.gethostname())


def _content(handle: IO[str]) -> str:
    handle.seek(0)
    return handle.read()


def _acquire(path: Path, command: str, wait_s: float, say: Callable[[str], None]) -> IO[str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held until release
    deadline, said = time.monotonic() + wait_s, 0.0
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            holder = Holder.read(_content(handle))
            who = holder.describe() if holder else "another process"
            now = time.monotonic()
            if now >= deadline:
                handle.close()
                raise BusyError(f"another testcurator run holds {path} ({who}); this run wrote nothing. "
                                f"Wait for it to end, or give --wait SECONDS to wait for it.") from None
            if now - said >= _SAY_EVERY_S:
                say(f"lock: waiting for {who} to release {path} ({deadline - now:.0f}s left of --wait)")
                said = now
            time.sleep(_POLL_S)
    stale = Holder.read(_content(handle))
    if stale is not None and stale.pid != os.getpid():
        say(f"lock: took over {path}, left by a run that did not finish ({stale.describe()}); "
            "`--resume` continues that run's work")
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps(_me(command).__dict__) + "\n")
    handle.flush()
    return handle


def _release(handle: IO[str]) -> None:
    handle.seek(0)
    handle.truncate()  # an empty file: released cleanly, nobody to report as killed
    handle.flush()
    fcntl.flock(handle, fcntl.LOCK_UN)
    handle.close()


@contextmanager
def hold(paths: Sequence[Path], command: str, *, wait_s: float = 0.0,
         say: Callable[[str], None] = lambda message: None) -> Iterator[None]:
    """Hold the lock files ``paths`` (in this order, so two runs never wait on each other
    crosswise) for the ``with`` block; see the module docstring."""
    with ExitStack() as stack:
        for path in paths:
            handle = _acquire(path, command, wait_s, say)
            stack.callback(_release, handle)
        yield


def run_locks(state_dir: Path, out_dir: Path | None) -> list[Path]:
    """The lock files of a run that writes ``state_dir`` (and ``out_dir``)."""
    return [state_dir / STATE_LOCK] + ([out_dir / OUT_LOCK] if out_dir is not None else [])
