"""A night's failures of the standing configs, told apart by what changed since the test last
passed; flaky tests by their outcome across runs with the same inputs; and what stays."""

from __future__ import annotations

import pytest
from testcurator.memory.history import RunIdentity
from testcurator.pipelines.nights.assess import FLAKY, REGRESSION, UPSTREAM, Night, assess, quarantine_decision
from testcurator.runner.results.records import TestRecord
from testcurator.vocab import TestKey

GENERIC = "TestFoo::test_bar"
KEY = TestKey.of("test/test_foo.py", GENERIC)


def _run(seq: int, backend: str = "b1", torch: str = "2.13.0") -> RunIdentity:
    return RunIdentity(f"nightly-{seq}", "nightly", f"2026-12-0{seq}T00:00:00+00:00", "/out", "dev", torch, "tree",
                       backend, "c", "c", seq=seq)


def _rec(outcome: str, cls: str | None = None) -> TestRecord:
    return TestRecord("test/test_foo.py::TestFooDEV::test_bar_dev_float32", outcome, generic=GENERIC,
                      failure_class=cls, evidence="Could not run 'aten::tanh.out'" if cls else None)


def _night(before: list[str], tonight: str, *, backend: str = "b1", torch: str = "2.13.0", source: str = "h1",
           judged: bool = True) -> Night:
    runs = [_run(i + 1) for i in range(len(before))]
    record = _rec("passed") if tonight == "P" else _rec("failed", "unsupported_op")
    return Night(_run(len(before) + 1, backend, torch), [record] if judged else [], [record], {KEY: source}, runs,
                 {KEY: {r.seq: s for r, s in zip(runs, before) if s != "."}}, {r.seq: {KEY: "h1"} for r in runs})


@pytest.mark.parametrize(("night", "category", "cause"), [
    (_night(["P"], "F", backend="b2"), REGRESSION, "backend changed (b1 -> b2)"),
    (_night(["P"], "F", torch="2.14.0"), UPSTREAM, "torch changed (2.13.0 -> 2.14.0)"),
    (_night(["P"], "F", source="h2"), UPSTREAM, "test source changed"),
    (_night(["P"], "F"), FLAKY, None),
    (_night(["F", "."], "F"), REGRESSION, "no run on record saw it pass"),
])
def test_a_mandatory_failure_is_told_by_what_changed_since_it_passed(night: Night, category: str,
                                                                     cause: str | None) -> None:
    result = assess(night, accept_regressions=False, policy="keep", flips_to_quarantine=2)
    (failure,) = result.failures
    assert failure.category == category
    assert failure.causes == ((cause,) if cause else ())
    assert (str(KEY) in result.held) == (category != UPSTREAM)  # a changed test's new decision is written


def test_an_accepted_regression_is_not_held_and_a_flaky_one_still_is() -> None:
    regressed = assess(_night(["P"], "F", backend="b2"), accept_regressions=True, policy="keep", flips_to_quarantine=2)
    assert regressed.held == () and regressed.accepted == (str(KEY),)
    flaky = assess(_night(["P"], "F"), accept_regressions=True, policy="keep", flips_to_quarantine=2)
    assert flaky.held == (str(KEY),)


def test_flips_count_only_runs_with_tonights_inputs() -> None:
    # P under b1, F under b2 (a regression), P under b1 again: not flaky.
    night = _night(["P"], "P")
    night = Night(night.now, night.judge, night.draft, night.hashes, [_run(1), _run(2, backend="b2")],
                  {KEY: {1: "P", 2: "F"}}, {1: {KEY: "h1"}, 2: {KEY: "h1"}})
    assert assess(night, accept_regressions=False, policy="keep", flips_to_quarantine=1).flaky == ()
    flaky = assess(_night(["P", "F", "P", "F"], "P"), accept_regressions=False, policy="keep", flips_to_quarantine=2)
    (item,) = flaky.flaky
    assert (item.timeline, item.flips, item.quarantined) == ("P F P F P", 4, False)
    assert str(KEY) in flaky.held  # one night does not flip its mode


def test_the_profile_can_quarantine_a_flaky_test_after_k_flips() -> None:
    result = assess(_night(["P", "F"], "P"), accept_regressions=False, policy="quarantine", flips_to_quarantine=2)
    (item,) = result.flaky
    assert item.quarantined and str(KEY) not in result.held
    decision = quarantine_decision(item, 2)
    assert (decision.test, decision.mode) == (GENERIC, "xfail")
    assert "P F P" in decision.reason and "quarantine after 2" in decision.reason
    kept = assess(_night(["P"], "F"), accept_regressions=False, policy="quarantine", flips_to_quarantine=2)
    assert not kept.flaky[0].quarantined  # one flip is not yet K
