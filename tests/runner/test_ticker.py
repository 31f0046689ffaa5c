"""Progress lines for long work (runner/ticker.py, runner/progress.py LineProgress)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from testcurator.runner.progress import LineProgress
from testcurator.runner.ticker import FirstCount, LineCounter, Ticker, duration, progress_line


@pytest.mark.parametrize(("seconds", "text"), [(9.4, "9s"), (106, "1m46s"), (7380, "2h03m")])
def test_duration(seconds: float, text: str) -> None:
    assert duration(seconds) == text


@pytest.mark.parametrize(("done", "total", "elapsed", "line"), [
    (120, 450, 40.0, "capture: 120/450 instances (26%), 3.0/s, about 1m50s left"),
    (0, 450, 12.0, "capture: 0/450 instances (0%), 0.0/s, starting (12s so far)"),
    (450, 450, 90.0, "capture: 450/450 instances (100%), 5.0/s, finishing"),
    (30, None, 10.0, "capture: 30 instances done, 3.0/s, 10s so far"),
    (None, None, 25.0, "capture: working, 25s so far"),
])
def test_progress_line(done: int | None, total: int | None, elapsed: float, line: str) -> None:
    assert progress_line("capture", "instances", done, total, elapsed) == line


@pytest.mark.parametrize(("polls", "line"), [
    # 10 s of start-up, then 30/s: the rate is taken from the first count on
    ([(5.0, 0), (10.0, 100), (20.0, 400)], "capture: 400/2307 instances (17%), 30.0/s, about 1m04s left"),
    # the first count itself has nothing to measure from: the whole time so far
    ([(5.0, 0), (10.0, 100)], "capture: 100/2307 instances (4%), 10.0/s, about 3m41s left"),
    # nothing more done since: the whole time so far, not a division by zero
    ([(10.0, 100), (20.0, 100)], "capture: 100/2307 instances (4%), 5.0/s, about 7m21s left"),
])
def test_the_rate_leaves_out_the_start_up(polls: list[tuple[float, int]], line: str) -> None:
    first = FirstCount()
    for elapsed, done in polls:
        since = first.see(elapsed, done)
    assert progress_line("capture", "instances", done, 2307, elapsed, since) == line


def test_a_ticker_speaks_while_the_block_runs_and_stops_after() -> None:
    lines: list[str] = []
    spoke = threading.Event()

    def say(line: str) -> None:
        lines.append(line)
        spoke.set()

    with Ticker.counting("capture", "instances", 10, lambda: 4, say, every=0.01):
        assert spoke.wait(10)
    count = len(lines)
    assert count >= 1 and lines[0].startswith("capture: 4/10 instances (40%)")
    spoke.clear()
    assert not spoke.wait(0.1) and len(lines) == count  # nothing after the block


def test_line_counter_reads_only_what_was_appended(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    log = tmp_path / "a" / "events.jsonl.gw0"
    log.write_text('{"event": "finish"}\n{"event": "start"}\n{"event": "fin', encoding="utf-8")
    count = LineCounter(tmp_path, "*/events.jsonl*", b'"event": "finish"')
    assert count() == 1
    with log.open("a", encoding="utf-8") as fh:  # the half-written line ends
        fh.write('ish"}\n{"event": "finish"}\n')
    assert count() == 3


def test_line_progress_says_the_phase_counts_and_failures() -> None:
    progress = LineProgress("execute", lambda line: None)
    progress.phase("run", None)
    assert progress.line(5.0) == "execute: collecting: working, 5s so far"
    progress.update(30, {"passed": 28, "failed": 2}, 120)
    assert progress.line(10.0) == "execute: running: 30/120 tests (25%), 3.0/s, about 30s left; 2 failed"
    progress.phase("retry1", 2)
    assert progress.line(1.0).startswith("execute: retrying 1: 0/2 tests")
