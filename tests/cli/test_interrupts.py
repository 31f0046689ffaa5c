"""An interrupt says so (exit 130) and leaves no empty --out folder behind; nor does --resume
with nothing to resume (issue 25)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NoReturn

import pytest
from rich.console import Console

from testcurator.cli.groups import config as config_cmds
from testcurator.cli.groups import run as run_cmds
from testcurator.cli.main import main
from testcurator.cli.paths import removing_if_created


def _interrupt(*_: Any) -> NoReturn:
    raise KeyboardInterrupt


def test_an_interrupted_command_exits_130_and_says_so(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(config_cmds, "json_schema", _interrupt)
    assert main(["schema"]) == 130
    assert capsys.readouterr().err.strip() == "interrupted (exit 130)"


def test_sigterm_stops_a_command_as_an_interrupt_does_and_exits_143(monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # A CI job's time limit sends SIGTERM: the command must stop through the same way out as
    # Ctrl-C (every pytest session it started is stopped there) and say so, not just vanish.
    def terminated(*_: Any) -> NoReturn:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)  # the handler raises before this ends
        raise AssertionError("SIGTERM did not stop the command")

    saved = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        monkeypatch.setattr(config_cmds, "json_schema", terminated)
        assert main(["schema"]) == 143
        assert capsys.readouterr().err.strip() == "terminated (SIGTERM, exit 143)"
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # put back on return
    finally:
        signal.signal(signal.SIGTERM, saved)


@pytest.mark.parametrize("existed", [False, True])
def test_an_interrupted_run_removes_the_out_folder_it_made(tmp_path: Path, existed: bool,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "runs" / "out"
    if existed:
        out.mkdir(parents=True)

    def run_nightly(ctx: Any) -> dict[str, Any]:
        ctx.out_dir.mkdir(parents=True, exist_ok=True)  # as the pipeline does first
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_cmds._run(run_nightly, SimpleNamespace(out_dir=out), Console(highlight=False, soft_wrap=True))
    assert out.is_dir() == existed and (tmp_path / "runs").is_dir() == existed
    assert f"interrupted: the run stopped; `testcurator run ... --out {out} --resume`" in capsys.readouterr().out


def test_a_folder_with_something_in_it_is_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(RuntimeError), removing_if_created(out):
        out.mkdir()
        (out / "report.md").write_text("half\n")
        raise RuntimeError("late bad input")
    assert (out / "report.md").is_file()


def test_resume_with_nothing_to_resume_leaves_no_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[2] / "examples"
    out = tmp_path / "new" / "out"
    code = main(["run", "--torch-root", str(root / "upstream"), "--backend", str(root / "backend" / "backend.yaml"),
                 "--out", str(out), "--resume", "--state-dir", str(tmp_path / "state")])
    assert code == 2 and "nothing to resume: no run recorded under" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
