"""``eval --run-unrun`` runs the tests a run skipped under that run's own per-test memory
limit (its run.json), unless ``--memory-limit-mb`` says otherwise: on OpenReg's corpus the
tests a config skips include an upstream gradient check that grew to 2.2 GB."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testcurator.cli.main import main
from testcurator.pipelines import evaluate


class _Ran(Exception):
    """Raised by the stand-in for the execution, once it has seen the run it was given."""


class _NoPredictions:
    def predict(self, run: evaluate.EvalRun) -> dict[Any, Any]:
        return {}


@pytest.mark.parametrize(("recorded", "option", "limit"), [
    (2048, [], 2048.0),  # the run's own
    (2048, ["--memory-limit-mb", "512"], 512.0),  # the option wins
    (2048, ["--memory-limit-mb", "0"], None),  # 0: none
    (None, [], None),  # a run without a limit
])
def test_run_unrun_takes_the_runs_memory_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded: int | None,
                                               option: list[str], limit: float | None) -> None:
    run_dir = tmp_path / "state" / "runs" / "r1"
    run_dir.mkdir(parents=True)
    meta = {"torch_root": str(tmp_path), "profile": str(tmp_path / "backend.yaml"), "out_dir": str(tmp_path / "out"),
            "state_dir": str(tmp_path / "state"), "files": [], "llm": None}
    if recorded is not None:
        meta["memory_limit_mb"] = recorded
    (run_dir / "run.json").write_text(json.dumps(meta))
    seen: list[float | None] = []

    def execute_unrun(run: evaluate.EvalRun, todo: object, **kw: object) -> None:
        seen.append(run.memory_limit_mb)
        raise _Ran

    monkeypatch.setattr(evaluate, "observed", lambda run: {})
    monkeypatch.setattr(evaluate, "tried_variants", lambda run: set())
    monkeypatch.setattr(evaluate, "StoredSource", _NoPredictions)
    monkeypatch.setattr(evaluate, "execute_unrun", execute_unrun)
    with pytest.raises(_Ran):
        main(["eval", str(run_dir), "--run-unrun", *option])
    assert seen == [limit]
