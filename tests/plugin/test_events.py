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


def test_without_options_nothing_is_registered(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, "test_ev.py::test_ok")
    assert proc.returncode == 0 and not list(tmp_path.glob("*.jsonl*"))
