"""`testcurator exec --labels`: through the installed entry point, on a small device-generic tree."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

EXE = Path(sys.executable).with_name("testcurator")


def test_exec_runs_only_labelled_files_and_says_what_was_left_out(
    tmp_path: Path, write_labelled_tree: Callable[[Path], Path]
) -> None:
    write_labelled_tree(tmp_path)
    proc = subprocess.run([str(EXE), "exec", "--config", str(tmp_path / "curate.yaml"), "--torch-root", str(tmp_path),
                           "--labels", "trunk", "--out", str(tmp_path / "out"), "--quiet"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    records = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert sorted(r["nodeid"].split("::", 1)[0] for r in records) == ["test_a.py", "test_a.py"]
    assert {r["outcome"] for r in records} == {"passed"}
    out = " ".join(proc.stdout.split())  # rich may wrap long lines
    assert "labels trunk: 1 of 2 config file(s) selected" in out
    assert "(labels: nightly)" in out and "test_b.py" in out


def test_exec_labels_need_a_config(tmp_path: Path) -> None:
    proc = subprocess.run([str(EXE), "exec", str(tmp_path), "--labels", "trunk", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--labels needs --config" in proc.stderr
