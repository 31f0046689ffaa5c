"""The run lock: one run at a time per state directory and --out; a killed holder is found
stale and its lock taken over, with a line that says so."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from testcurator.lock import BusyError, hold, run_locks

HOLDER = """
import sys, time
from pathlib import Path
from testcurator.lock import hold
with hold([Path(p) for p in sys.argv[1:]], "testcurator run --out OUT (the other run)"):
    print("held", flush=True)
    time.sleep(120)
"""


def _holder(paths: list[Path]) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, *map(str, paths)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_run_refuses_naming_the_first_and_writes_nothing(tmp_path: Path) -> None:
    locks = run_locks(tmp_path / "state", tmp_path / "out")
    proc = _holder(locks)
    try:
        before = sorted(p.name for p in tmp_path.rglob("*"))
        with pytest.raises(BusyError) as err:
            with hold(locks, "testcurator run (this one)"):
                pytest.fail("entered a lock another process holds")
        message = str(err.value)
        assert f"pid {proc.pid}" in message and "the other run" in message and "--wait" in message
        assert err.value.exit_code == 3
        assert sorted(p.name for p in tmp_path.rglob("*")) == before
    finally:
        proc.kill()
        proc.wait()


def test_wait_takes_the_lock_once_the_holder_ends(tmp_path: Path) -> None:
    locks = run_locks(tmp_path / "state", None)
    proc = _holder(locks)
    said: list[str] = []
    start = time.monotonic()
    try:
        subprocess.Popen(["sh", "-c", f"sleep 1; kill {proc.pid}"])
        with hold(locks, "waiting run", wait_s=30, say=said.append):
            assert time.monotonic() - start < 30
    finally:
        proc.kill()
        proc.wait()


def test_a_lock_left_by_a_killed_run_is_taken_over_and_said(tmp_path: Path) -> None:
    locks = run_locks(tmp_path / "state", tmp_path / "out")
    proc = _holder(locks)
    os.kill(proc.pid, signal.SIGKILL)  # no clean release: the file still names it
    proc.wait()
    assert json.loads(locks[0].read_text())["pid"] == proc.pid
    said: list[str] = []
    with hold(locks, "next run", say=said.append):
        assert json.loads(locks[0].read_text())["pid"] == os.getpid()
    assert len(said) == 2 and all(f"pid {proc.pid}" in s and "did not finish" in s for s in said)
    assert locks[0].read_text() == ""  # released cleanly: nobody to report next time
    with hold(locks, "third run", say=said.append):
        pass
    assert len(said) == 2
