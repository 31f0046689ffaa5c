"""Progress display for a run: a rich bar with live outcome counts.

The runner talks to a :class:`ProgressSink`; :class:`RichProgress` draws a bar on the
terminal, :class:`NullProgress` draws nothing (tests, benchmarks, ``--quiet``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

_SHOWN = ("passed", "failed", "error", "skipped", "xfailed", "xpassed", "crashed", "timeout")
_STYLE = {"passed": "green", "failed": "red", "error": "red", "crashed": "magenta", "timeout": "magenta"}


class ProgressSink(Protocol):
    """What the runner reports while tests run."""

    def phase(self, label: str, total: int | None) -> None: ...

    def update(self, done: int, counts: Mapping[str, int], total: int | None = None) -> None: ...

    def __enter__(self) -> ProgressSink: ...

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None: ...


def format_counts(counts: Mapping[str, int], *, markup: bool = False) -> str:
    parts = []
    for key in _SHOWN:
        if counts.get(key):
            text = f"{counts[key]} {key}"
            style = _STYLE.get(key)
            parts.append(f"[{style}]{text}[/]" if markup and style else text)
    return ", ".join(parts) or "-"


class NullProgress:
    def phase(self, label: str, total: int | None) -> None:
        return None

    def update(self, done: int, counts: Mapping[str, int], total: int | None = None) -> None:
        return None

    def __enter__(self) -> NullProgress:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        return None


class RichProgress:
    """One bar per phase (``run``, ``retry 1``...), counts in its description."""

    def __init__(self, console: Console | None = None) -> None:
        self.progress = Progress(
            TextColumn("{task.fields[label]:<8}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"), TimeElapsedColumn(),
            console=console or Console(stderr=True), transient=False,
        )
        self.task: int | None = None

    def phase(self, label: str, total: int | None) -> None:
        self.task = self.progress.add_task(label, total=total, label=label, counts="-")

    def update(self, done: int, counts: Mapping[str, int], total: int | None = None) -> None:
        if self.task is None:
            self.phase("run", None)
        assert self.task is not None
        total = max(done, total or 0, self.progress.tasks[self.task].total or 0) or None
        self.progress.update(self.task, completed=done, total=total, counts=format_counts(counts, markup=True))

    def __enter__(self) -> RichProgress:
        self.progress.start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.progress.stop()
