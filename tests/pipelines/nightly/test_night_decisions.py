"""What emit writes for tonight's regressed and flaky tests: an accepted regression's change
says it was accepted and when the test last passed; a quarantined flaky test is a
non-strict xfail with its timeline; every other decision is refine's, untouched."""

from __future__ import annotations

from types import SimpleNamespace

from testcurator.agents.decision import Decision
from testcurator.config.profile import FlakyPolicy
from testcurator.pipelines.nightly.steps import _night_decisions
from testcurator.pipelines.nights.assess import REGRESSION, Assessment, Failure, Flaky

FILE = "test/test_view_ops.py"


def _decision(test: str, mode: str = "xfail_strict", reason: str = "Xfail strict: fails with unsupported_op.") -> Decision:
    return Decision(test, mode, reason, ("execution",), "offline", None)  # type: ignore[arg-type]


def test_accepted_and_quarantined_decisions() -> None:
    ctx = SimpleNamespace(profile=SimpleNamespace(flaky=FlakyPolicy(policy="quarantine", flips=2)))
    night = Assessment(
        failures=(Failure(f"{FILE}::TestOld::test_split", REGRESSION, ("backend changed (a -> b)",), 3, 3, "x",
                          {"run_id": "nightly-1", "date": "2026-12-01T00:00:00+00:00"}),),
        flaky=(Flaky(f"{FILE}::TestOld::test_board", "P F P", 2, True),),
        accepted=(f"{FILE}::TestOld::test_split",))
    decisions = [_decision("TestOld::test_split"), _decision("TestOld::test_board", "mandatory_success"),
                 _decision("TestOld::test_other", "mandatory_success", "Passed.")]
    split, board, other = _night_decisions(ctx, night, FILE, decisions)  # type: ignore[arg-type]
    assert split.mode == "xfail_strict" and split.reason.startswith("Xfail strict: fails with unsupported_op.")
    assert "Accepted as a regression of the backend (--accept-regressions); it last passed in run nightly-1" in split.reason
    assert (board.mode, board.brain) == ("xfail", "history") and "P F P" in board.reason
    assert other == decisions[2]
    assert _night_decisions(ctx, night, "test/other.py", decisions) == decisions  # another file: untouched
