"""`testcurator gaps RUN_DIR|latest`: the four formats, --out, and bad input (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testcurator.cli.main import main
from testcurator.memory.opmap import OpMap

PROFILE = "schema_version: 1\nname: gapdev\ndevice: {kind: privateuse1, name: gapdev}\nhooks: [eager_ops]\n"


def _run(root: Path, *, captured: bool) -> Path:
    """A finished run that held nothing back, recorded as `latest` under ``root / 'state'``."""
    state = root / "state"
    run = state / "runs" / "run-1"
    (run / "verify").mkdir(parents=True)
    (root / "backend.yaml").write_text(PROFILE, encoding="utf-8")
    (run / "run.json").write_text(json.dumps({"files": [], "out_dir": str(root / "out"), "state_dir": str(state),
                                              "profile": str(root / "backend.yaml")}), encoding="utf-8")
    (run / "memory.json").write_text(json.dumps({"captured": captured}), encoding="utf-8")
    (run / "verify" / "results.jsonl").write_text("", encoding="utf-8")
    (state / "runs" / "latest.json").write_text(json.dumps({"run_dir": str(run)}), encoding="utf-8")
    if captured:
        OpMap(state).store([])
    return run


@pytest.mark.parametrize(("fmt", "start"), [("text", "What to implement next on gapdev"), ("json", "["),
                                             ("markdown", "# What to implement next"), ("html", "<!DOCTYPE html>")])
def test_every_format_of_latest(tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, start: str) -> None:
    _run(tmp_path, captured=True)
    assert main(["gaps", "latest", "--state-dir", str(tmp_path / "state"), "--format", fmt]) == 0
    assert capsys.readouterr().out.startswith(start)


def test_out_writes_the_file(tmp_path: Path) -> None:
    run = _run(tmp_path, captured=True)
    assert main(["gaps", str(run), "--format", "json", "--out", str(tmp_path / "gaps.json")]) == 0
    assert json.loads((tmp_path / "gaps.json").read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(("captured", "args", "message"), [
    (True, ["nowhere"], "nowhere does not exist"),
    (False, ["latest"], "has no CPU op capture"),
])
def test_bad_input_says_what_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], captured: bool,
                                         args: list[str], message: str) -> None:
    _run(tmp_path, captured=captured)
    args = [str(tmp_path / a) if a == "nowhere" else a for a in args]
    assert main(["gaps", *args, "--state-dir", str(tmp_path / "state")]) == 2
    assert message in capsys.readouterr().err
