"""What the CPU op capture runs (memory/capture_select.py), and what the others get from it."""

from __future__ import annotations

import json

import pytest

from testcurator.memory.capture_run import report_lines
from testcurator.memory.capture_select import (NOT_ON_DEVICE, OVER_BUDGET, RULED_OUT, SAME_KIND, SKIPPED_UPSTREAM,
                                               RuleOut, dtype_holds, family, kind_of, project, select)
from testcurator.plugin.oprecord import OpRecord

F = "test/test_ops.py"


def static(test: str, generic: str, dtype: str | None = None, op: str | None = None,
           outcome: str | None = None) -> OpRecord:
    return OpRecord(f"{F}::TestOpsCPU::{test}", generic, "static", device="cpu", dtype=dtype, op=op, outcome=outcome)


RECORDS = [
    # an OpInfo test: two ops x four dtypes of two families
    *(static(f"test_out_{op}_cpu_{dt}", "TestOps::test_out", dt, op) for op in ("add", "mul")
      for dt in ("int64", "int32", "float64", "float32")),
    # a parametrized test: two parameter values x two dtypes of one family, no op
    *(static(f"test_pool_{p}_cpu_{dt}", "TestOps::test_pool", dt) for p in ("2x3", "0") for dt in ("bfloat16", "float16")),
    # a test the device does not instantiate
    static("test_cuda_only_cpu_float32", "TestOps::test_cuda_only", "float32"),
    # skipped at collection upstream
    static("test_skipped_cpu", "TestOps::test_skipped", outcome="skipped"),
]


def on_device(file: str, generic: str) -> bool:
    return generic != "TestOps::test_cuda_only"


def test_one_instance_per_kind_the_preferred_dtype_and_the_reasons_counted() -> None:
    sel = select(RECORDS, on_device, cost=lambda rec: 1.0)
    kept = sorted(r.nodeid.rpartition("::")[2] for r in sel.keep)
    # one per op, parameters and dtype family; float32 first, else the next preferred
    # (float16 before bfloat16; int32 before int64, the dtype of index tensors)
    assert kept == ["test_out_add_cpu_float32", "test_out_add_cpu_int32", "test_out_mul_cpu_float32",
                    "test_out_mul_cpu_int32", "test_pool_0_cpu_float16", "test_pool_2x3_cpu_float16"]
    assert sel.left_out == {NOT_ON_DEVICE: 1, SAME_KIND: 6, SKIPPED_UPSTREAM: 1}
    assert sel.source_of[f"{F}::TestOpsCPU::test_out_add_cpu_int64"] == f"{F}::TestOpsCPU::test_out_add_cpu_int32"
    assert sel.source_of[f"{F}::TestOpsCPU::test_out_add_cpu_float64"] == f"{F}::TestOpsCPU::test_out_add_cpu_float32"
    assert sel.estimate_s == 6.0
    # the --curate-only lines name instances by identity: the generic class, the instance's own name
    assert f"{F}::TestOps::test_out_add_cpu_float32\tTestOps::test_out\n" in sel.lines()


def test_without_a_device_collection_every_test_counts() -> None:
    sel = select(RECORDS, None, cost=lambda rec: 1.0)
    assert NOT_ON_DEVICE not in sel.left_out
    assert any(r.generic == "TestOps::test_cuda_only" for r in sel.keep)


GRADIENTS = [  # a gradient test: float64 and complex128 only, each a family of its own
    static("test_grad_add_cpu_float64", "TestOps::test_grad", "float64", "add"),
    static("test_grad_add_cpu_complex128", "TestOps::test_grad", "complex128", "add"),
    # int16 is the preferred integer, but the profile has int64 only
    static("test_out_add_cpu_int16", "TestOps::test_out", "int16", "add"),
    static("test_out_add_cpu_int64", "TestOps::test_out", "int64", "add"),
]


def test_the_capture_runs_nothing_the_profile_rules_out_and_says_why() -> None:
    sel = select(GRADIENTS, None, cost=lambda rec: 1.0, rule_out=RuleOut(frozenset({"float32", "int64"}), None))
    assert [r.nodeid.rpartition("::")[2] for r in sel.keep] == ["test_out_add_cpu_int64"]
    # a ruled-out instance of a captured kind is still projected; a kind with no allowed instance is not captured
    assert sel.source_of == {f"{F}::TestOpsCPU::test_out_add_cpu_int16": f"{F}::TestOpsCPU::test_out_add_cpu_int64"}
    float64, complex128 = (f"{RULED_OUT}: dtype {d} is not in supported_dtypes" for d in ("float64", "complex128"))
    assert sel.left_out == {float64: 1, complex128: 1, SAME_KIND: 1}
    lines = "\n".join(report_lines({"kept": 1, "instances": 4, "estimate_s": 1.0, "left_out": sel.left_out,
                                     "projected": 1, "files_captured": 1, "files_reused": 0,
                                     "rule_out": "supported_dtypes float32, int64"}))
    assert f"- left out, {float64}: 1" in lines and "supported_dtypes float32, int64" in lines


@pytest.mark.parametrize(("rule", "reason"), [
    (RuleOut(frozenset({"float64"}), frozenset({"eager_ops"})), "dtype complex128 is not in supported_dtypes"),
    (RuleOut(None, frozenset({"eager_ops"})), "dtype complex128 needs the complex hook"),
    (RuleOut(None, frozenset({"eager_ops", "complex"})), None),
    (RuleOut(None, None), None),  # nothing declared: nothing ruled out
])
def test_what_the_profile_rules_out(rule: RuleOut, reason: str | None) -> None:
    assert rule.reason(GRADIENTS[1]) == (f"{RULED_OUT}: {reason}" if reason else None)


def test_a_budget_keeps_every_tests_first_kind_before_any_second() -> None:
    sel = select(RECORDS, on_device, cost=lambda rec: 1.0, budget_s=2.5)
    assert sorted(r.generic for r in sel.keep) == ["TestOps::test_out", "TestOps::test_pool"]
    # test_out's other three kinds (two dtypes each), test_pool's second kind (two dtypes)
    assert sel.left_out[OVER_BUDGET] == 3 * 2 + 2
    assert sel.estimate_s <= 2.5


def test_a_budget_smaller_than_one_kind_per_test_spreads_over_the_files() -> None:
    # Three files of four tests each, a budget for three instances: one test of each file,
    # not the first three tests of the first file in path order.
    records = [OpRecord(f"test/test_{f}.py::TestX{f}CPU::test_{t}_cpu_float32", f"TestX{f}::test_{t}", "static",
                        device="cpu", dtype="float32") for f in "abc" for t in range(4)]
    sel = select(records, None, cost=lambda rec: 1.0, budget_s=3.0)
    assert sorted(r.nodeid.split("::")[0] for r in sel.keep) == ["test/test_a.py", "test/test_b.py", "test/test_c.py"]
    assert sel.left_out[OVER_BUDGET] == 9


def test_a_budget_buys_every_op_once_before_an_op_in_a_second_test() -> None:
    # Upstream test_unary_ufuncs: 50 OpInfo tests over the same ops. In plain order every test
    # spent its turns on the alphabetically first ops, and sinh, tan, special.* ran in none.
    ops = ("abs", "acos", "sinh", "tan")
    records = [static(f"test_{t}_{op}_cpu_float32", f"TestOps::test_{t}", "float32", op)
               for t in ("a", "b") for op in ops]
    sel = select(records, None, cost=lambda rec: 1.0, budget_s=4.0)
    assert sorted((r.generic, r.op) for r in sel.keep) == [
        ("TestOps::test_a", "abs"), ("TestOps::test_a", "sinh"), ("TestOps::test_b", "acos"), ("TestOps::test_b", "tan")]
    # Once every op is covered, a test takes its remaining kinds in order.
    more = select(records, None, cost=lambda rec: 1.0, budget_s=6.0)
    assert {(r.generic, r.op) for r in more.keep} - {(r.generic, r.op) for r in sel.keep} == {
        ("TestOps::test_a", "acos"), ("TestOps::test_b", "abs")}


@pytest.mark.parametrize(("dtype", "expected"), [
    ("float32", "floating"), ("float64", "floating"), ("float16", "reduced_floating"),
    ("bfloat16", "reduced_floating"), ("float8_e4m3fn", "reduced_floating"), ("int64", "integral"),
    ("uint8", "integral"), ("complex64", "complex"), ("bool", "bool"),
])
def test_dtype_families(dtype: str, expected: str) -> None:
    assert family(dtype) == expected


def test_reduced_precision_floats_are_captured_apart_from_float32() -> None:
    # An exact comparison that holds in float32 can fail in bfloat16 on CPU itself (upstream
    # test_scatter_reduce_sum): a projection from float32 would hide that CPU failure.
    records = [static(f"test_sum_cpu_{dt}", "TestOps::test_sum", dt) for dt in ("float32", "float64", "bfloat16", "float16")]
    sel = select(records, None, cost=lambda rec: 1.0)
    assert sorted(r.dtype or "" for r in sel.keep) == ["float16", "float32"]
    assert sel.source_of[f"{F}::TestOpsCPU::test_sum_cpu_bfloat16"] == f"{F}::TestOpsCPU::test_sum_cpu_float16"


@pytest.mark.parametrize(("name", "dtype", "expected"), [
    ("test_out_add_cpu_float32", "float32", "test_out_add_cpu"),
    ("test_pair_cpu_complex64_float32", "complex64_float32", "test_pair_cpu"),
    ("test_plain", None, "test_plain"),
])
def test_kind_drops_only_the_dtype(name: str, dtype: str | None, expected: str) -> None:
    assert kind_of(static(name, "TestOps::t", dtype))[4] == expected


def test_projection_rewrites_the_dtype_in_calls_and_examples_and_has_no_outcome() -> None:
    sel = select(RECORDS, on_device, cost=lambda rec: 1.0)
    example = {"args": [{"tensor": "float32", "shape": [2], "stride": [1]},
                        {"tensor": "int64", "shape": [1], "stride": [1], "values": [0]}], "kwargs": {"dtype": {"dtype": "float32"}}}
    done = OpRecord(f"{F}::TestOpsCPU::test_out_add_cpu_float32", "TestOps::test_out", "captured", device="cpu",
                    dtype="float32", op="add", aten=("aten::add.Tensor",), outcome="failed", failure="E: boom",
                    calls=("aten::add.Tensor(float32,int64)",),
                    examples={"aten::add.Tensor(float32,int64)": json.dumps(example)})
    projected = {r.nodeid.rpartition("::")[2]: r for r in project(RECORDS, [done], sel)}
    assert sorted(projected) == ["test_out_add_cpu_float64"]  # the integral family has its own capture
    rec = projected["test_out_add_cpu_float64"]
    assert (rec.dtype, rec.aten, rec.outcome, rec.failure) == ("float64", ("aten::add.Tensor",), None, None)
    assert rec.calls == ("aten::add.Tensor(float64,int64)",)
    rebuilt = json.loads(rec.examples["aten::add.Tensor(float64,int64)"])
    assert rebuilt["args"][0]["tensor"] == "float64" and rebuilt["kwargs"]["dtype"] == {"dtype": "float64"}
    # the int64 index tensor is not of the test's dtype: it and its values stay (indices in range)
    assert rebuilt["args"][1] == example["args"][1]


def test_a_retyped_index_tensor_keeps_its_values_where_the_new_dtype_holds_them() -> None:
    # int32 -> int64 (embedding_bag's indices and offsets): without them the probe's replay
    # read memory the example left unset. Where a value does not fit, test_dtype_holds says it goes.
    sel = select(RECORDS, on_device, cost=lambda rec: 1.0)
    example = {"args": [{"tensor": "int32", "shape": [2], "stride": [1], "values": [3, 4]}], "kwargs": {}}
    done = OpRecord(f"{F}::TestOpsCPU::test_out_mul_cpu_int32", "TestOps::test_out", "captured", device="cpu",
                    dtype="int32", op="mul", calls=("aten::mul.Tensor(int32)",),
                    examples={"aten::mul.Tensor(int32)": json.dumps(example)})
    (rec,) = project(RECORDS, [done], sel)
    assert rec.nodeid.endswith("test_out_mul_cpu_int64")
    assert json.loads(rec.examples["aten::mul.Tensor(int64)"])["args"][0] == {"tensor": "int64", "shape": [2],
                                                                                "stride": [1], "values": [3, 4]}


@pytest.mark.parametrize(("values", "dtype", "fits"), [
    ([0, 1, True], "bool", True), ([2], "bool", False), ([-1], "uint8", False), ([255], "uint8", True),
    ([1, 2], "float32", False),  # a floating tensor is filled afresh
])
def test_dtype_holds(values: list[int], dtype: str, fits: bool) -> None:
    assert dtype_holds(values, dtype) is fits


def test_a_projection_finds_its_calls_examples_on_other_records() -> None:
    """The capture process keeps one example per call, on the first record that made it: the
    captured instance's own record may carry none of them."""
    sel = select(RECORDS, on_device, cost=lambda rec: 1.0)
    example = {"args": [{"tensor": "float32", "shape": [3], "stride": [1]}], "kwargs": {}}
    first = OpRecord(f"{F}::TestOpsCPU::test_out_mul_cpu_float32", "TestOps::test_out", "captured", device="cpu",
                     dtype="float32", op="mul", calls=("aten::neg(float32)",),
                     examples={"aten::neg(float32)": json.dumps(example)})
    done = OpRecord(f"{F}::TestOpsCPU::test_out_add_cpu_float32", "TestOps::test_out", "captured", device="cpu",
                    dtype="float32", op="add", calls=("aten::neg(float32)",))
    add64 = next(r for r in project(RECORDS, [first, done], sel) if r.nodeid.endswith("test_out_add_cpu_float64"))
    assert json.loads(add64.examples["aten::neg(float64)"])["args"][0]["tensor"] == "float64"


def test_a_tests_floating_kind_of_an_op_comes_before_its_bool_kind() -> None:
    # Upstream test_reference_numerics_* skips itself in bool: captured through bool alone, an op
    # (lgamma, atan...) ran no call at all, and nothing was known of the kernels it needs.
    records = [static(f"test_r_{op}_cpu_{dt}", "TestOps::test_r", dt, op) for op in ("atan", "lgamma")
               for dt in ("bool", "float32")]
    sel = select(records, None, cost=lambda rec: 1.0, budget_s=2.0)
    assert sorted((r.op, r.dtype) for r in sel.keep) == [("atan", "float32"), ("lgamma", "float32")]
