"""`testcurator report RUN_DIR`, and the hints where a run folder is expected (issue 25)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testcurator.cli.main import main
from testcurator.cli.run_dirs import run_folder

DATA = {"backend": "curatedev", "device": "curatedev", "torch_root": "/t", "decided_by": "bucket",
        "run": {"torch_version": "2.13.0", "upstream_revision": "abc123", "date": "2026-12-01T00:00:00+00:00",
                "command": "testcurator run --torch-root /t", "exit_code": 0},
        "totals": {"mandatory_success": 2, "xfail": 0, "xfail_strict": 0, "skip": 0},
        "per_file": {"test/test_a.py": {"mandatory_success": 2}}, "configs": {}, "held_back": {},
        "held_back_instances": {}, "scope": [], "needs_review": [], "llm_fallbacks": [], "brains": {"offline": 2},
        "usage": {}, "timings_s": {"scope": 1.0}, "emit": {}, "verify": None}


@pytest.fixture
def finished(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(state dir, run folder, --out folder) of a run that reached the report stage."""
    state, out = tmp_path / "state", tmp_path / "out"
    run = state / "runs" / "nightly-1"
    run.mkdir(parents=True)
    out.mkdir()
    (run / "run.json").write_text(json.dumps({"out_dir": str(out), "torch_root": "/t"}))
    (state / "runs" / "latest.json").write_text(json.dumps({"run_dir": str(run), "out_dir": str(out)}))
    (out / "report.json").write_text(json.dumps(DATA))
    return state, run, out


@pytest.mark.parametrize("which", ["out", "run", "latest"])
def test_report_renders_report_md_again(finished: tuple[Path, Path, Path], which: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    state, run, out = finished
    target = {"out": str(out), "run": str(run), "latest": "latest"}[which]
    assert main(["report", target, "--state-dir", str(state)]) == 0
    md = (out / "report.md").read_text(encoding="utf-8")
    assert md.startswith("# testcurator run: curatedev (curatedev)")
    assert "| command | `testcurator run --torch-root /t` |" in md  # the run's command, not `report`'s
    assert json.loads((out / "report.json").read_text())["run"]["exit_code"] == 0
    assert f"wrote {out / 'report.md'}" in capsys.readouterr().out


def test_an_out_folder_names_its_run(finished: tuple[Path, Path, Path]) -> None:
    state, run, out = finished
    assert run_folder(out, state) == run and run_folder(run, state) == run.resolve()


def test_not_a_run_says_what_a_run_folder_is_and_lists_them(finished: tuple[Path, Path, Path], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    state, run, _ = finished
    assert main(["eval", str(tmp_path), "--state-dir", str(state)]) == 2
    err = capsys.readouterr().err
    assert f"error: {tmp_path} is not a run folder: a run folder is <state-dir>/runs/<id>/ (it holds run.json" in err
    assert f"run folders under {tmp_path}: {run}" in err and "runs under" in err and "nightly-1" in err
    assert "Traceback" not in err and len(err.splitlines()) == 3


def test_no_run_anywhere_says_where_runs_are(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "out" / "example"), "--state-dir", str(tmp_path / "st")]) == 2
    err = capsys.readouterr().err
    assert "does not exist: a run folder is" in err and f"no run recorded under {tmp_path / 'st' / 'runs'}" in err
