"""The events plugin in real pytest processes: order, per-worker files, the hang guard."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

QUIET = ["-p", "no:cacheprovider", "-p", "no:langsmith_plugin", "-p", "no:hypothesispytest", "-p", "no:anyio"]
TESTS = """
import time

def test_ok():
    pass

def test_fail():
    assert 2 + 2 == 5

def test_hang():
    time.sleep(60)
"""


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_ev.py").write_text(TESTS, encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", *QUIET, *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


def _events(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_start_before_reports_and_hang_guard(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, "test_ev.py", "--curate-events", "ev.jsonl", "--curate-timeout", "2")
    assert proc.returncode == 1  # faulthandler's exit on the hang
    events = _events(tmp_path / "ev.jsonl")
    kinds = [(e["event"], str(e.get("nodeid", "")).split("::")[-1], e.get("when")) for e in events]
    assert kinds[0][0] == "collected"
    assert kinds[1:6] == [("start", "test_ok", None), ("report", "test_ok", "setup"), ("report", "test_ok", "call"),
                          ("report", "test_ok", "teardown"), ("finish", "test_ok", None)]
    fail_call = next(e for e in events if e.get("when") == "call" and "test_fail" in str(e["nodeid"]))
    assert fail_call["outcome"] == "failed" and "assert (2 + 2) == 5" in str(fail_call["longrepr"])
    assert kinds[-2:] == [("start", "test_hang", None), ("report", "test_hang", "setup")]  # never finished
    assert (tmp_path / "ev.jsonl.fault").read_text().startswith("Timeout (0:00:02)!")


def test_xdist_writes_one_file_per_worker(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, "test_ev.py::test_ok", "test_ev.py::test_fail", "-n", "2", "--curate-events", "ev.jsonl")
    assert proc.returncode == 1, proc.stdout
    files = sorted(p.name for p in tmp_path.glob("ev.jsonl*") if not p.name.endswith(".fault"))
    assert files == ["ev.jsonl.controller", "ev.jsonl.gw0", "ev.jsonl.gw1"]
    finished = {str(e["nodeid"]) for name in files for e in _events(tmp_path / name) if e["event"] == "finish"}
    assert finished == {"test_ev.py::test_ok", "test_ev.py::test_fail"}


@pytest.mark.parametrize("extra", [[], ["-p", "testcurator.plugin.events"]])
def test_options_register_once(tmp_path: Path, extra: list[str]) -> None:
    proc = _pytest(tmp_path, "test_ev.py::test_ok", *extra, "--curate-events", "ev.jsonl")
    assert proc.returncode == 0, proc.stderr
    assert any(e["event"] == "finish" for e in _events(tmp_path / "ev.jsonl"))


@pytest.mark.parametrize("value", ["0", "-5", "lots"])
def test_a_memory_limit_that_is_not_a_positive_number_is_a_usage_error(tmp_path: Path, value: str) -> None:
    proc = _pytest(tmp_path, "test_ev.py::test_ok", f"--curate-memory-limit={value}")
    assert proc.returncode == 4 and "--curate-memory-limit" in proc.stderr, proc.stderr


def test_without_options_nothing_is_registered(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, "test_ev.py::test_ok")
    assert proc.returncode == 0 and not list(tmp_path.glob("*.jsonl*"))


SKIPS = """
import pytest

@pytest.mark.skip(reason="dtype float64 is not in supported_dtypes")
def test_skipped():
    pass

@pytest.mark.skip
def test_skipped_bare():
    pass

@pytest.mark.skipif(False, reason="not now")
@pytest.mark.skip(reason="the skipif decides first")
def test_skipif_first():
    pass

@pytest.mark.parametrize("n", [1, 2])
def test_runs(n):
    assert n < 2
"""


def _records(events: Path) -> dict[str, tuple[object, ...]]:
    from testcurator.runner.eventlog import EventFold

    fold = EventFold()
    for path in sorted(events.parent.glob(events.name + "*")):
        if not path.name.endswith(".fault"):
            for event in _events(path):
                fold.feed(path, event)
    return {n: (r.outcome, r.failure_text, r.generic) for n, r in fold.finished_records().items()}


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_settled_skips_are_logged_at_collection_with_the_outcomes_pytest_gives(tmp_path: Path,
                                                                               workers: list[str]) -> None:
    (tmp_path / "test_skips.py").write_text(SKIPS, encoding="utf-8")
    plain = subprocess.run([sys.executable, "-m", "pytest", "-q", *QUIET, "test_skips.py", *workers,
                            "--curate-events", "plain/ev.jsonl"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    settled = subprocess.run([sys.executable, "-m", "pytest", "-q", *QUIET, "test_skips.py", *workers,
                              "--curate-events", "settled/ev.jsonl", "--curate-settle-skips"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert plain.returncode == settled.returncode == 1, settled.stdout
    assert "2 deselected" in settled.stdout or workers  # xdist's controller does not count a worker's deselection
    records = _records(tmp_path / "settled" / "ev.jsonl")
    assert records == _records(tmp_path / "plain" / "ev.jsonl")
    assert records["test_skips.py::test_skipped"][:2] == ("skipped", "Skipped: dtype float64 is not in supported_dtypes")
    assert records["test_skips.py::test_skipped_bare"][:2] == ("skipped", "Skipped: unconditional skip")
    logs = [p for p in (tmp_path / "settled").glob("ev.jsonl*") if not p.name.endswith(".fault")]
    events = [e for p in logs for e in _events(p)]
    settled = [e for e in events if e["event"] == "settled"]
    assert sorted(str(e["nodeid"]).split("::")[1] for e in settled) == ["test_skipped", "test_skipped_bare"]
    assert len(settled) + sum(e["event"] == "start" for e in events) == 5  # each test logged once, by one process
    # One line a settled skip, not the four a run test gets (start, setup, teardown, finish).
    assert not {e["nodeid"] for e in settled} & {e.get("nodeid") for e in events if e["event"] != "settled"}


def test_settle_skips_without_an_event_log_is_a_usage_error(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, "test_ev.py::test_ok", "--curate-settle-skips")
    assert proc.returncode == 4 and "--curate-settle-skips needs --curate-events" in proc.stderr
