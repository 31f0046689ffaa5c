"""The reason check: each pattern of a false reason issue 22 found on real files, and the
reasons that make no claim about the device, against records of what ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from testcurator.pipelines.evaluate import Prediction
from testcurator.pipelines.reason_check import check
from testcurator.runner.results.records import TestRecord
from testcurator.vocab import TestKey

ROOT = Path("/torch")
FILE = "test/test_shape_ops.py"


def _rec(test: str, outcome: str, *, evidence: str | None = None, cls: str | None = None, dtype: str = "float32",
         text: str | None = None) -> TestRecord:
    return TestRecord(nodeid=f"{FILE}::TestShapeOpsOPENREG::{test}_openreg_{dtype}", outcome=outcome,
                      generic=f"TestShapeOps::{test}", device="openreg", dtype=dtype, failure_class=cls,
                      evidence=evidence, failure_text=text)


SEGV = "Fatal Python error: Segmentation fault (SIGSEGV)"
CASES = [
    # (mode, reason, records) -> kind of contradiction, or None
    ("skip", "Skip: it needs sparse (captured op: aten::sparse_dim), which the backend does not implement.",
     [_rec("test_dim", "passed")], "passes"),
    ("skip", "Skip: it needs sparse (source: `x.to_sparse()`), which the preference `no sparse` excludes.",
     [_rec("test_dim", "passed")], None),
    ("skip", "Skip: @onlyCPU restricts it to cpu, and the backend's device is 'openreg'.",
     [_rec("test_dim", "passed")], None),
    ("mandatory_success", "Mandatory success confirmed on the device: the only variant passed on every attempt.",
     [_rec("test_dim", "failed", evidence="AssertionError: 1 != 2", cls="unknown")], "fails"),
    ("xfail_strict", "Xfail strict: every variant failed on every attempt with unsupported_op (`Could not run "
     "'aten::flip' with arguments from the 'openreg' backend`), so an unexpected pass will signal promotion.",
     [_rec("test_dim", "failed", evidence="ValueError: Unknown device type openreg for Dlpack", cls="unknown")],
     "error"),
    # Quoted single-spaced, as every reason quotes; the error itself had two spaces.
    ("xfail_strict", "Xfail strict: every variant failed on every attempt with unsupported_dtype (`RuntimeError: Sort "
     "does not support complex dtypes on CPU`).", [_rec("test_dim", "failed", cls="unsupported_dtype",
                                                       evidence="RuntimeError:  Sort does not support complex dtypes")],
     None),
    ("xfail", "Xfail: the probe's replay of aten::nonzero.out(int64,int64) crashed the process (`the process died "
     "(signal SIGSEGV)`), and every instance makes that call.", [_rec("test_dim", "crashed", evidence=SEGV,
                                                                      cls="crash")], None),
    ("xfail", "Xfail: the probe's replay of aten::nonzero.out(int64,int64) crashed the process (`the process died "
     "(signal SIGSEGV)`), and every instance makes that call.", [_rec("test_dim", "passed")], "passes"),
    ("skip", "Skip: every variant was skipped on the device by the test itself (no reason given).",
     [_rec("test_dim", "skipped", dtype="float64", text="Skipped: dtype float64 excluded by edits (c.yaml:9:11)")],
     "skipped"),
    ("skip", "Skip: every variant was skipped on the device by the test itself (`Only runs on cpu`).",
     [_rec("test_dim", "skipped", text="Skipped: Only runs on cpu")], None),
]


@pytest.mark.parametrize(("mode", "reason", "records", "kind"), CASES)
def test_reasons_against_results(mode: str, reason: str, records: list[TestRecord], kind: str | None) -> None:
    key = TestKey.of(FILE, "TestShapeOps::test_dim")
    found = check({key: (Prediction(mode), reason)}, records, ROOT)
    assert [c.kind for c in found] == ([kind] if kind else [])
    if found:
        assert found[0].test == str(key) and found[0].reason == reason
        assert found[0].line().startswith(f"`{key}` ({mode}): the reason says")


def test_an_entrys_own_edits_apply_before_judging() -> None:
    """A mandatory entry that excludes float64 is not contradicted by float64 failing."""
    key = TestKey.of(FILE, "TestShapeOps::test_dim")
    records = [_rec("test_dim", "passed"), _rec("test_dim", "failed", evidence="boom", cls="unknown", dtype="float64")]
    prediction = Prediction("mandatory_success", exclude_dtypes=("float64",))
    assert check({key: (prediction, "Mandatory success, with dtypes float64 excluded.")}, records, ROOT) == []
    [found] = check({key: (Prediction("mandatory_success"), "Mandatory.")}, records, ROOT)
    assert found.kind == "fails" and found.found.startswith("1 of 2 variants that ran failed (unknown: boom)")


def test_counts_are_said_in_words_not_variant_s() -> None:
    key = TestKey.of(FILE, "TestShapeOps::test_dim")
    skip = (Prediction("skip"), CASES[0][1])
    [one] = check({key: skip}, [_rec("test_dim", "passed")], ROOT)
    assert one.found == "the only variant that ran passed on the device"
    [two] = check({key: skip}, [_rec("test_dim", "passed"), _rec("test_dim", "passed", dtype="float64")], ROOT)
    assert two.found == "all 2 variants that ran passed on the device"
