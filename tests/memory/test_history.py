"""The memory of runs: identities, per-instance outcomes per phase, statuses per test, and a
bounded size (the last N runs keep their outcomes; older ones their identity and counts)."""

from __future__ import annotations

from pathlib import Path

import pytest
from testcurator.memory.history import History, RunIdentity, status
from testcurator.runner.results.records import TestRecord
from testcurator.vocab import TestKey

GENERIC = "TestFoo::test_bar"


def _identity(n: int, backend: str = "b1") -> RunIdentity:
    return RunIdentity(f"nightly-{n}", "nightly", f"2026-12-0{n}T00:00:00+00:00", "/out", "dev", "2.13.0", "abc",
                       backend, f"c{n}", f"c{n - 1}")


def _record(outcome: str, dtype: str = "float32", cls: str | None = None) -> TestRecord:
    # The device suffix of the class differs between processes (OpenReg): the identity does not.
    suffix = "PRIVATEUSE1" if dtype == "float32" else "OPENREG"
    return TestRecord(f"test/test_foo.py::TestFoo{suffix}::test_bar_openreg_{dtype}", outcome, generic=GENERIC,
                      failure_class=cls, evidence="Could not run 'aten::tanh.out'" if cls else None)


@pytest.mark.parametrize(("outcomes", "expected"), [
    ([("passed", None), ("passed", None)], "P"),
    ([("passed", None), ("failed", "unsupported_op")], "F"),
    ([("xfailed", None)], "F"),
    ([("failed", "unexpected_pass")], "P"),  # a strict xfail that passed
    ([("skipped", None)], "-"),
])
def test_status_of_a_test_in_one_run(outcomes: list[tuple[str, str | None]], expected: str) -> None:
    assert status(outcomes) == expected


def test_runs_are_recorded_with_outcomes_per_phase_and_counts(tmp_path: Path) -> None:
    with History(tmp_path) as history:
        first = history.record(_identity(1), [("test/test_foo.py", GENERIC, "h1")],
                               {"draft": [_record("passed"), _record("passed", "float16")]})
        second = history.record(_identity(2, "b2"), [("test/test_foo.py", GENERIC, "h1")],
                                {"judge": [_record("failed", cls="unsupported_op"), _record("passed", "float16")],
                                 "verify": [_record("failed", cls="unsupported_op"), _record("skipped", "float16")]})
        assert (first.seq, second.seq) == (1, 2)
        assert [r.backend_digest for r in history.runs("/out")] == ["b1", "b2"]
        key = TestKey.of("test/test_foo.py", GENERIC)
        assert history.statuses([1, 2]) == {key: {1: "P", 2: "F"}}
        assert history.counts("/out") == {1: {"test/test_foo.py": (2, 0, 0)}, 2: {"test/test_foo.py": (0, 1, 1)}}
        failures = history.failures(2, "judge")
        assert list(failures) == ["test/test_foo.py::TestFoo::test_bar_openreg_float32"]  # the instance key
        assert history.sources(2) == {key: "h1"}
        again = history.record(_identity(2, "b2"), [], {"draft": [_record("passed")]})  # a resumed run reports again
        assert again.seq == 3 and [r.run_id for r in history.runs()] == ["nightly-1", "nightly-2"]


def test_only_the_last_runs_keep_their_outcomes(tmp_path: Path) -> None:
    with History(tmp_path) as history:
        for n in range(1, 6):
            history.record(_identity(n), [("test/test_foo.py", GENERIC, "h")], {"draft": [_record("passed")]}, keep=2)
        runs = history.runs()
        assert [r.compacted for r in runs] == [True, True, True, False, False]
        assert [r.run_id for r in history.runs(full_only=True)] == ["nightly-4", "nightly-5"]
        assert set(history.statuses([r.seq for r in runs])[TestKey.of("test/test_foo.py", GENERIC)]) == {4, 5}
        assert sorted(history.counts()) == [1, 2, 3, 4, 5]  # the chart still has every run
        assert history.sources(1) == {}


def test_each_runs_status_comes_from_one_phase_judge_then_verify_then_draft(tmp_path: Path) -> None:
    # A non-strict xfail: its instance fails in the draft (no config) and passes in the curated
    # runs. Run 1 (first: draft and verify) and run 2 (judge and draft) must both read P.
    with History(tmp_path) as history:
        history.record(_identity(1), [("test/test_foo.py", GENERIC, "h")],
                       {"draft": [_record("failed", cls="numerical_mismatch")], "verify": [_record("xpassed")]})
        history.record(_identity(2), [("test/test_foo.py", GENERIC, "h")],
                       {"judge": [_record("xpassed")], "verify": [_record("failed", cls="unsupported_op")],
                        "draft": [_record("failed", cls="numerical_mismatch")]})
        history.record(_identity(3), [("test/test_foo.py", GENERIC, "h")], {"draft": [_record("failed")]})
        assert history.statuses([1, 2, 3]) == {TestKey.of("test/test_foo.py", GENERIC): {1: "P", 2: "P", 3: "F"}}
