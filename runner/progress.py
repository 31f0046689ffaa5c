"""Progress display for a run: a rich bar per phase with live outcome counts.

The runner talks to a :class:`ProgressSink`; :class:`RichProgress` draws a bar on the
terminal, :class:`LineProgress` says a line every 8 s (the pipeline's draft and
verification runs, whose output may go to a log), :class:`NullProgress` draws nothing
(tests, benchmarks, ``--quiet``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from testcurator.runner.ticker import EVERY_S, FirstCount, Ticker, progress_line
from testcurator.vocab import OUTCOMES

_STYLE = {"passed": "green", "failed": "red", "error": "red", "crashed": "magenta", "timeout": "magenta"}


class ProgressSink(Protocol):
    """What the runner reports while tests run."""

    def phase(self, label: str, total: int | None) -> None: ...

    def update(self, done: int, counts: Mapping[str, int], total: int | None = None) -> None: ...

    def __enter__(self) -> ProgressSink: ...

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None: ...


def format_counts(counts: Mapping[str, int], *, markup: bool = False) -> str:
    parts = []
    for key in OUTCOMES:
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


def phase_name(label: str, done: int, total: int | None) -> str:
    """What the user sees for the runner's phase labels: ``run`` is *collecting* until pytest
    has reported what it collected, then *running*; ``retryN`` is *retrying N*."""
    if label == "run":
        return "collecting" if not total and not done else "running"
    if label.startswith("retry"):
        return f"retrying {label.removeprefix('retry')}".strip()
    return label


class RichProgress:
    """One row per phase (collecting/running, retrying N, merging), named from the first
    second, with a spinner, the outcome counts and the elapsed time. Re-entrant: the CLI opens
    it before the runner (which opens it again) so that loading the config and starting
    pytest already show as *collecting*."""

    def __init__(self, console: Console | None = None) -> None:
        self.progress = Progress(
            SpinnerColumn(finished_text="✓"), TextColumn("{task.fields[name]:<11}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"), TimeElapsedColumn(),
            console=console or Console(stderr=True), transient=False,
        )
        self.task: int | None = None
        self.label = ""
        self._depth = 0

    def phase(self, label: str, total: int | None) -> None:
        current = self.progress.tasks[self.task] if self.task is not None else None
        if current is not None and not current.completed and self.label in ("collecting", "run") and label == "run":
            self.label = label  # the CLI's "collecting" row becomes the run's row
            self.progress.update(self.task, total=total, name=phase_name(label, 0, total))
            return
        if current is not None and not current.finished and current.total:
            self.progress.update(self.task, completed=current.total)
        self.label = label
        self.task = self.progress.add_task(label, total=total, name=phase_name(label, 0, total), counts="-")

    def update(self, done: int, counts: Mapping[str, int], total: int | None = None) -> None:
        if self.task is None:
            self.phase("run", None)
        assert self.task is not None
        total = max(done, total or 0, self.progress.tasks[self.task].total or 0) or None
        self.progress.update(self.task, completed=done, total=total, counts=format_counts(counts, markup=True),
                             name=phase_name(self.label, done, total))

    def __enter__(self) -> RichProgress:
        if self._depth == 0:
            self.progress.start()
        self._depth += 1
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._depth -= 1
        if self._depth == 0:
            if et is None and self.task is not None:  # the last phase (merging) ended with the run
                task = self.progress.tasks[self.task]
                self.progress.update(self.task, total=task.total or 1, completed=task.total or 1)
            self.progress.stop()


class LineProgress:
    """Says ``label: running: 120/450 tests (27%), 3.1/s, about 1m46s left; 3 failed`` every
    ``every`` seconds while the run is open, whatever its output is piped to."""

    def __init__(self, label: str, say: Callable[[str], None], every: float = EVERY_S) -> None:
        self.label, self.say, self.every = label, say, every
        self.name, self.total, self.done = "collecting", None, 0
        self.counts: Mapping[str, int] = {}
        self._ticker: Ticker | None = None
        self._depth = 0
        self._first = FirstCount()

    def phase(self, label: str, total: int | None) -> None:
        self.name, self.total, self.done = label, total, 0
        self._first = FirstCount()  # a new phase's rate is its own

    def update(self, done: int, counts: Mapping[str, int], total: int | None = None) -> None:
        self.done, self.total, self.counts = done, max(done, total or 0, self.total or 0) or None, dict(counts)

    def line(self, elapsed: float) -> str:
        name = phase_name(self.name, self.done, self.total)
        done = self.done if self.total else None
        text = progress_line(f"{self.label}: {name}", "tests", done, self.total, elapsed, self._first.see(elapsed, done))
        failing = format_counts({k: v for k, v in self.counts.items() if k != "passed"})
        return text + (f"; {failing}" if failing != "-" else "")

    def __enter__(self) -> LineProgress:
        if self._depth == 0:
            self._ticker = Ticker(self.line, self.say, self.every).__enter__()
        self._depth += 1
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._depth -= 1
        if self._depth == 0 and self._ticker is not None:
            self._ticker.__exit__(et, ev, tb)
            self._ticker = None
