"""Refine's separation by one @parametrize value (issue 13 item 2): the rule as a table, the
spelling it writes, and the rails honouring the exclusion."""

from __future__ import annotations

from pathlib import Path

import pytest

from testcurator.agents import rails
from testcurator.agents.brain import BackendContext, BrainContext, BrainSettings, BucketRequest, ExecutionRecord, RefineRequest
from testcurator.agents.decision import Decision
from testcurator.agents.offline.brain import OfflineBrain
from testcurator.config.params import excludes, spelling

BACKEND = BackendContext(name="dev", device="curatedev", hooks=("eager_ops",))
TEST = BucketRequest("TestPool::test_reduce", "test_pool.py", "h")
MSG = "AssertionError: Tensor-likes are not close!"
SHAPES = {"2x3": "(2, 3)", "4": "(4,)", "0": "(0,)"}


def rec(shape: str, reduction: str, *outcomes: str, dtype: str = "float32", cls: str | None = None) -> ExecutionRecord:
    params = [("reduction", repr(reduction)), ("shape", SHAPES[shape])]
    failing = any(o != "passed" for o in outcomes)
    return ExecutionRecord(f"test_reduce_shape{shape}_reduction_{reduction}_curatedev_{dtype}", outcomes, dtype=dtype,
                           failure_class=(cls or "numerical_mismatch") if failing else None,
                           message=MSG if failing else "", params=tuple(sorted(params)))


def grid(fails: set[tuple[str, str]], *, dtype: str = "float32") -> list[ExecutionRecord]:
    """Every shape x reduction; the pairs in ``fails`` fail on both attempts."""
    return [rec(s, r, *(("failed", "failed") if (s, r) in fails else ("passed",)), dtype=dtype)
            for s in SHAPES for r in ("mean", "sum")]


def refine(records: list[ExecutionRecord], before: Decision | None = None) -> Decision:
    before = before or Decision(TEST.test, "mandatory_success", "Earlier.", ("e",), "offline", None)
    [record] = OfflineBrain(BrainSettings()).refine([RefineRequest(TEST, before, tuple(records))],
                                                    BrainContext(BACKEND, frozenset(), Path("/tmp/tree")))
    return record


ALL_SHAPE_0 = {("0", "mean"), ("0", "sum")}

CASES = [
    # (records) -> (mode, exclude_params, exclude_dtypes, needs_review, reason fragment)
    pytest.param(grid(ALL_SHAPE_0), "mandatory_success", ("shape=0",), (), False,
                 "parameter shape=0 (the 2 variants that have it all fail, the other 4 do not)", id="one-shape"),
    pytest.param(grid({(s, "mean") for s in SHAPES}), "mandatory_success", ("reduction=mean",), (), False,
                 "parameter reduction=mean", id="one-reduction"),
    # The failures are also exactly the float16 variants: the dtype wins (behaviour before params).
    pytest.param(grid(set()) + [rec("0", r, "failed", "failed", dtype="float16") for r in ("mean", "sum")],
                 "mandatory_success", (), ("float16",), False, "dtypes float16 excluded", id="dtype-first"),
    pytest.param(grid({("2x3", "sum"), ("4", "mean")}), "xfail", (), (), True,
                 "no dtype, op, module or parameter value separates them", id="two-values-no-split"),
    # The failing variant's shape passes with the other reduction, its reduction with other shapes.
    pytest.param(grid({("0", "sum")}), "xfail", (), (), True, "no dtype, op, module or parameter value",
                 id="value-also-passes"),
    pytest.param(grid({(s, r) for s in SHAPES for r in ("mean", "sum")}), "xfail_strict", (), (), False,
                 "every variant failed", id="all-fail-no-exclusion"),
    pytest.param([*(r for r in grid(set()) if "shape0" not in r.variant), rec("0", "mean", "failed", "passed"),
                  rec("0", "sum", "failed", "failed")],
                 "xfail", (), (), True, "parameter value separates", id="flaky-sibling-no-split"),
    pytest.param([*(r for r in grid(set()) if "shape0" not in r.variant),
                  rec("0", "mean", "crashed", cls="crash"), rec("0", "sum", "crashed", cls="crash")],
                 "mandatory_success", ("shape=0",), (), False, "crashed", id="crash-at-one-value"),
]


@pytest.mark.parametrize(("records", "mode", "params", "dtypes", "review", "fragment"), CASES)
def test_separation_by_one_parameter_value(records: list[ExecutionRecord], mode: str, params: tuple[str, ...],
                                           dtypes: tuple[str, ...], review: bool, fragment: str) -> None:
    record = refine(records)
    assert (record.mode, record.exclude_params, record.exclude_dtypes, record.needs_review) == (
        mode, params, dtypes, review), record.reason
    assert fragment in record.reason, record.reason
    assert not rails._execution_rails(record, RefineRequest(TEST, None, tuple(records)))


def test_earlier_param_exclusions_are_kept() -> None:
    before = Decision(TEST.test, "mandatory_success", "Earlier.", ("e",), "config", None, exclude_params=("shape=4",))
    records = [r for r in grid({("0", "mean"), ("0", "sum")}) if "shape4" not in r.variant]
    assert refine(records, before).exclude_params == ("shape=0", "shape=4")


def test_exclusion_spelled_so_it_names_that_value_only() -> None:
    # n=3 and n='3' both read "3" in instance names: the literal tells them apart.
    records = [ExecutionRecord("a", ("passed",), params=(("n", "3"),)),
               ExecutionRecord("b", ("failed", "failed"), failure_class="numerical_mismatch", message=MSG,
                               params=(("n", "'3'"),))]
    record = refine(records)
    assert record.exclude_params == ("n='3'",)
    assert excludes(record.exclude_params, records[1].params) and not excludes(record.exclude_params, records[0].params)


@pytest.mark.parametrize(("text", "others", "expected"), [
    ("(2, 3)", ["(4,)"], "2x3"),
    ("'mean'", ["'sum'"], "mean"),
    ("0.5", ["2.0"], "0.5"),
    ("True", ["False"], "True"),
    ("'3'", ["3"], "'3'"),
    ("3", ["'3'"], None),  # "3" also names the string '3': nothing names the int alone
    # Classes and functions by name (name_fn=lambda x: x.__name__, upstream dynamo/test_sets.py).
    ("<class 'set'>", ["<class 'frozenset'>"], "set"),
    ("<class 'test_sets.SetSubclass'>", ["<class 'set'>"], "SetSubclass"),
    ("<function relu at 0x7f3a2c>", ["<function gelu at 0x7f3a2d>"], "relu"),
    ("<Pool object at 0x7f3a2c>", [], None),  # the address differs in every process
    ("torch.float32", [], "torch.float32"),
])
def test_spelling(text: str, others: list[str], expected: str | None) -> None:
    got = spelling(text, others)
    assert got == expected
    if got is not None:  # it names ``text`` and no other value
        assert excludes([f"x={got}"], [("x", text)])
        assert not any(excludes([f"x={got}"], [("x", o)]) for o in others)


def test_rails_honour_param_exclusions() -> None:
    records = tuple(grid(ALL_SHAPE_0))
    kept = Decision(TEST.test, "mandatory_success", "r", ("e",), "llm", "h", exclude_params=("shape=0",))
    bare = Decision(TEST.test, "mandatory_success", "r", ("e",), "llm", "h")
    request = RefineRequest(TEST, None, records)
    assert not rails._execution_rails(kept, request)
    assert rails._execution_rails(bare, request)
