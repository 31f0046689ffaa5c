"""A progress line for long work that reports no progress of its own: done/total, rate, ETA.

A stage such as the op capture waits on pytest processes (local or on Ray) for minutes. A
:class:`Ticker` runs beside it in a thread, asks ``count()`` how much is done (the capture:
finished tests in its shards' event logs; None: nothing countable, a collection) and says
one line every ``every`` seconds (8), so that a run is never silent for 10 s, on a terminal or
piped to a log:

    capture: 120/450 instances (27%), 3.1/s, about 1m46s left
    memory: collecting on cpu and curatedev, indexing: working, 20s so far
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

EVERY_S = 8.0  # under the 10 s a user waits at most without a word, with room for a late tick


def duration(seconds: float) -> str:
    """``1m46s``, ``2h03m``, ``9s``."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def progress_line(label: str, unit: str, done: int | None, total: int | None, elapsed: float,
                  since: tuple[float, int] | None = None) -> str:
    """One line: done/total (percent), rate, and the time left at that rate; with nothing
    to count (``done`` None), how long it has been working. ``since`` (elapsed, done): the
    rate is measured from there (:class:`FirstCount`), when more is done since."""
    if done is None:
        return f"{label}: working, {duration(elapsed)} so far"
    if since is not None and elapsed > since[0] and done > since[1]:
        rate = (done - since[1]) / (elapsed - since[0])
    else:
        rate = done / elapsed if elapsed > 0 else 0.0
    if not total:
        return f"{label}: {done} {unit} done, {rate:.1f}/s, {duration(elapsed)} so far"
    shown = f"{label}: {done}/{total} {unit} ({100 * done // total}%), {rate:.1f}/s"
    if done == 0:
        return f"{shown}, starting ({duration(elapsed)} so far)"
    left = f"about {duration((total - done) / rate)} left" if done < total else "finishing"
    return f"{shown}, {left}"


class FirstCount:
    """Where counting began: the first (elapsed, done) seen with anything done. The rate from
    there leaves out the start-up before the first item (a corpus capture's imports and
    collection: its first lines said "10.7/s, about 3m19s left" at a steady 30/s)."""

    def __init__(self) -> None:
        self.at: tuple[float, int] | None = None

    def see(self, elapsed: float, done: int | None) -> tuple[float, int] | None:
        if self.at is None and done:
            self.at = (elapsed, done)
        return self.at


class Ticker:
    """Says ``line(elapsed seconds)`` every ``every`` seconds while the ``with`` block runs."""

    def __init__(self, line: Callable[[float], str], say: Callable[[str], None], every: float = EVERY_S) -> None:
        self.line, self.say, self.every = line, say, every
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = 0.0

    @classmethod
    def counting(cls, label: str, unit: str, total: int | None, count: Callable[[], int | None],
                 say: Callable[[str], None], every: float = EVERY_S) -> Ticker:
        """A ticker saying :func:`progress_line` of what ``count()`` finds done."""
        first = FirstCount()

        def line(elapsed: float) -> str:
            done = count()
            return progress_line(label, unit, done, total, elapsed, first.see(elapsed, done))

        return cls(line, say, every)

    def __enter__(self) -> Ticker:
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="ticker", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                line = self.line(time.monotonic() - self._start)
            except OSError:  # a log rotated or removed under us: say nothing this time
                continue
            self.say(line)

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


class LineCounter:
    """How many lines of the files matching ``pattern`` under ``folder`` hold ``needle``, read
    incrementally (each poll reads only what was appended since the last)."""

    def __init__(self, folder: Path, pattern: str, needle: bytes) -> None:
        self.folder, self.pattern, self.needle = folder, pattern, needle
        self._offsets: dict[Path, int] = {}
        self._count = 0

    def __call__(self) -> int:
        for path in sorted(self.folder.glob(self.pattern)) if self.folder.is_dir() else []:
            start = self._offsets.get(path, 0)
            with path.open("rb") as fh:
                fh.seek(start)
                chunk = fh.read()
            end = chunk.rfind(b"\n") + 1  # a half-written line waits for the next poll
            self._count += chunk[:end].count(self.needle)
            self._offsets[path] = start + end
        return self._count
