"""The offline brain: its rules as tables of request -> expected record, the rails over a
varied batch, and determinism."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest

from testcurator.agents import rails
from testcurator.agents.brain import (
    BackendContext, BrainContext, BrainSettings, BucketRequest, ExecutionRecord, RefineRequest, ScopeRequest,
    SimilarTest,
)
from testcurator.agents.decision import CONFIG_BRAIN, Decision, to_json
from testcurator.agents.registry import make_brain
from testcurator.agents.offline.brain import OfflineBrain
from testcurator.agents.offline.rules import RULES_HASH, parse_preferences

PREFS = (
    "Eager operator correctness on the device matters most: reference checks against CPU.",
    "Autograd through supported ops matters; double backward does not.",
    "No torch.compile / inductor, no distributed, no sparse, no quantized, no CUDA-only features.",
    "Float64 and complex are not supported; tests that only exercise them are not worth running.",
    "Serialisation, multiprocessing and multi-device tests are out of scope (one device).",
)
BACKEND = BackendContext(
    name="curatedev", device="curatedev", hooks=("eager_ops", "autograd"), preferences=PREFS,
    supported_dtypes=frozenset({"float32", "float16", "bfloat16", "int32", "int64", "bool"}),
    unsupported_ops=frozenset({"aten::cumsum", "rsub", "aten::_scaled_mm"}),
    unsupported_dtypes=frozenset({"float16"}), registered_ops=frozenset({"aten::empty.memory_format", "aten::add"}),
)
PLAIN = BackendContext(name="plain", device="curatedev", hooks=("eager_ops",))
NO_HOOKS = BackendContext(name="bare", device="curatedev")
FALLBACK = replace(PLAIN, has_fallback=True)
CUDA = BackendContext(name="cuda", device="cuda", hooks=("eager_ops", "autograd", "compile", "inductor", "distributed"))

MSG_OP = ("NotImplementedError: Could not run 'aten::add.out' with arguments from the 'curatedev' backend. This could "
          "be because the operator doesn't exist for this backend, or was omitted during the selective/custom build "
          "process (if using custom build).")
MSG_DTYPE = "NotImplementedError: \"aten::add.out\" not implemented for 'Double' on curatedev (allowed dtypes: Float)"
MSG_CLOSE = ("AssertionError: Tensor-likes are not close!\n\nMismatched elements: 3 / 4 (75.0%)\n"
             "Greatest absolute difference: 0.0078125 at index (1,) (up to 1e-05 allowed)")
MSG_SEGV = "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):"
MSG_TIMEOUT = "Timeout (0:05:00)!\nThread 0x00007f (most recent call first):"
MSG_INFRA = "OSError: [Errno 98] Address already in use"
MSG_SKIP = "Only runs on ['cuda']"


def brain() -> OfflineBrain:
    return OfflineBrain(BrainSettings())


def ctx(backend: BackendContext = BACKEND, known: frozenset[str] = frozenset(),
        tree: Path = Path("/tmp/tree")) -> BrainContext:
    return BrainContext(backend=backend, known_tests=known, tree=tree)


# --- preference grammar ---------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    (PREFS[0], {("include", "hook", "eager_ops")}),
    (PREFS[1], {("include", "hook", "autograd"), ("exclude", "area", "double_backward")}),
    (PREFS[2], {("exclude", "hook", h) for h in ("compile", "inductor", "distributed", "sparse", "quantized")}
     | {("exclude", "area", "cuda")}),
    (PREFS[3], {("exclude", "dtype", "float64"), ("exclude", "hook", "complex")}),
    (PREFS[4], {("exclude", "hook", "serialization"), ("exclude", "area", "multiprocessing"),
                ("exclude", "area", "multi_device")}),
    ("focus on eager ops, skip test_foo.py and distributed/",
     {("include", "hook", "eager_ops"), ("exclude", "path", "test_foo.py"), ("exclude", "path", "distributed")}),
    ("only eager ops", {("only", "hook", "eager_ops")}),
    ("Do not skip autograd", {("include", "hook", "autograd")}),
    ("ignore sparse for now", {("exclude", "hook", "sparse")}),
    ("the onnx exporter is nice", set()),  # no trigger: ignored
])
def test_preference_grammar(text: str, expected: set[tuple[str, str, str]]) -> None:
    assert {(w.polarity, w.kind, w.value) for w in parse_preferences([text])} == expected


# --- stage 1: scope ------------------------------------------------------------------------

DG = "Tests of tensor basics; instantiate_device_type_tests(TestBasics, globals())"
SCOPE_CASES = [
    # (backend, path, kind, summary, n_tests) -> (keep, needs_review, reason fragment)
    (BACKEND, "distributed", "dir", "", 120, False, False, "excludes distributed"),
    (BACKEND, "inductor/test_compile_smoke.py", "file", "", 4, False, False, "excludes inductor"),
    (BACKEND, "test_cuda_only.py", "file", "", 3, False, False, "excludes cuda"),
    (PLAIN, "test_cuda_only.py", "file", "", 3, False, False, "CUDA-only features"),
    (CUDA, "test_cuda_only.py", "file", "", 3, True, True, "no rule maps"),
    (PLAIN, "test_mps.py", "file", "", 30, False, False, "MPS-only"),
    (BACKEND, "test_ops.py", "file", "", 50, True, False, "asks for eager_ops"),
    (PLAIN, "test_view_ops.py", "file", "", 50, True, False, "exercises the eager_ops hook"),
    (PLAIN, "nn/test_pooling.py", "file", "", 50, True, False, "exercises the eager_ops hook"),
    (BACKEND, "test_autograd.py", "file", "", 500, True, False, "asks for autograd"),
    (PLAIN, "test_autograd.py", "file", "", 500, False, False, "needs the autograd hook"),
    (PLAIN, "test_ops_gradients.py", "file", "", 5, False, False, "needs the autograd hook"),
    (PLAIN, "onnx", "dir", "", 80, False, False, "needs the onnx hook"),
    (PLAIN, "jit/test_tracer.py", "file", "", 80, False, False, "needs the jit hook"),
    (PLAIN, "test_sparse_csr.py", "file", "", 80, False, False, "needs the sparse hook"),
    (PLAIN, "fx/test_passes.py", "file", "", 8, False, False, "compile or export hook"),
    (replace(PLAIN, hooks=("eager_ops", "export")), "fx/test_passes.py", "file", "", 8, True, False,
     "compile or export"),
    (replace(PLAIN, hooks=("eager_ops", "compile", "autograd")), "dynamo/test_autograd_function.py", "file", "", 9,
     True, False, "compile and autograd"),
    (replace(PLAIN, hooks=("eager_ops", "compile")), "dynamo/test_autograd_function.py", "file", "", 9, False, False,
     "needs the autograd hook"),
    (BACKEND, "test_serialization.py", "file", "", 40, False, False, "excludes serialization"),
    (BACKEND, "test_multiprocessing.py", "file", "", 40, False, False, "excludes multiprocessing"),
    (PLAIN, "test_public_bindings.py", "file", "", 3, False, False, "tooling"),
    (PLAIN, "cpp_extensions", "dir", "", 3, False, False, "C++ / packaging"),
    (PLAIN, "test_helpers.py", "file", "", 0, False, False, "n_tests=0"),
    (PLAIN, "test_tensor_basics.py", "file", DG, 12, True, False, "device-generic"),
    (replace(PLAIN, hooks=("distributed",)), "test_tensor_basics.py", "file", DG, 12, False, False,
     "does not implement eager_ops"),
    (PLAIN, "test_tensor_basics.py", "file", "Tests of tensor basics.", 12, True, True, "no rule maps"),
    (NO_HOOKS, "test_ops.py", "file", "", 12, True, True, "declares no hooks"),
    (replace(PLAIN, preferences=("include serialization",)), "test_serialization.py", "file", "", 40, True, False,
     "asks for serialization"),
    (replace(PLAIN, preferences=("only eager ops",)), "test_autograd.py", "file", "", 40, False, False,
     "limits the scope to eager_ops"),
    (replace(PLAIN, preferences=("only eager ops",)), "test_torch.py", "file", "", 40, True, False,
     "asks for eager_ops"),
    (replace(PLAIN, preferences=("skip test_torch.py",)), "test_torch.py", "file", "", 40, False, False,
     "names test_torch.py itself"),
    (replace(CUDA, preferences=("include cuda",)), "test_cuda.py", "file", "", 40, True, False, "asks for cuda"),
]


@pytest.mark.parametrize(("backend", "path", "kind", "summary", "n_tests", "keep", "review", "fragment"), SCOPE_CASES)
def test_scope_rules(backend: BackendContext, path: str, kind: str, summary: str, n_tests: int, keep: bool,
                     review: bool, fragment: str) -> None:
    [record] = brain().scope([ScopeRequest(path, kind, summary, n_tests)], ctx(backend))  # type: ignore[arg-type]
    assert (record.path, record.keep, record.needs_review) == (path, keep, review)
    assert fragment in record.reason
    assert record.evidence and record.brain == "offline" and record.prompt_hash == RULES_HASH


# --- stage 3: bucket -----------------------------------------------------------------------

def breq(test: str = "TestX::test_a", **kw: object) -> BucketRequest:
    return BucketRequest(test, kw.pop("file", "test_x.py"), "h-" + test, **kw)  # type: ignore[arg-type]


BUCKET_CASES = [
    # (backend, request) -> (mode, exclude_dtypes, exclude_ops, needs_review, reason fragment)
    (BACKEND, breq(decorators=("@onlyCUDA",)), "skip", (), (), False, "@onlyCUDA restricts it to cuda"),
    (BACKEND, breq(decorators=("@onlyCPU",)), "skip", (), (), False, "@onlyCPU"),
    (BACKEND, breq(decorators=("@onlyOn(['cuda', 'xpu'])",)), "skip", (), (), False, "cuda, xpu"),
    (BACKEND, breq(decorators=("@onlyNativeDeviceTypes",), aten_ops=("aten::add.Tensor",)), "mandatory_success", (), (),
     False, "none of the 1 ATen ops"),
    (BACKEND, breq(decorators=("@onlyCUDAAndPRIVATEUSE1",), aten_ops=("aten::add.Tensor",)), "mandatory_success", (),
     (), False, "Mandatory"),
    (BACKEND, breq(decorators=("@skipMeta",), aten_ops=("aten::add.Tensor",)), "mandatory_success", (), (), False,
     "Mandatory"),
    (replace(PLAIN, device="meta"), breq(decorators=("@skipMeta",)), "skip", (), (), False,
     "@skipMeta skips it on the backend's device"),
    (BACKEND, breq(decorators=("@skipPRIVATEUSE1",)), "skip", (), (), False, "'curatedev' (privateuse1)"),
    (BACKEND, breq(decorators=('@unittest.skipIf(not TEST_CUDA, "CUDA not available")',)), "skip", (), (), False,
     "restricts it to cuda"),
    (BACKEND, breq(decorators=('@unittest.skipIf(not (TEST_CUDA or TEST_PRIVATEUSE1), "unavailable")',),
                   aten_ops=("aten::add.Tensor",)), "mandatory_success", (), (), False, "Mandatory"),
    (CUDA, breq(decorators=("@onlyCUDA",), aten_ops=("aten::mm",)), "mandatory_success", (), (), False, "Mandatory"),
    (BACKEND, breq(file="test_cuda_only.py"), "skip", (), (), False, "CUDA-only file"),
    # A test that registers privateuse1's device module for a dummy of its own: the privateuse1
    # backend loaded in the process holds it (upstream test_extension_utils, on OpenReg and curatedev).
    (BACKEND, breq(source='def test_a(self):\n    torch._register_device_module("privateuseone", Dummy)\n'), "xfail",
     (), (), True, "which curatedev, the privateuse1 backend loaded in the same process, already holds"),
    (CUDA, breq(source='def test_a(self):\n    torch._register_device_module("privateuseone", Dummy)\n'),
     "mandatory_success", (), (), True, "Mandatory"),
    (BACKEND, breq(decorators=('@unittest.skip("flaky on all platforms")',)), "skip", (), (), False,
     "upstream skips it"),
    (BACKEND, breq(decorators=("@unittest.expectedFailure",)), "xfail", (), (), False, "upstream expects it to fail"),
    (PLAIN, breq(source="def test_a(self, device):\n    x.sum().backward()\n"), "skip", (), (), False,
     "needs the autograd hook (source: `x.sum().backward()`)"),
    (PLAIN, breq("TestGradients::test_fn_grad", ops=("add",)), "skip", (), (), False, "needs the autograd hook"),
    (PLAIN, breq(aten_ops=("aten::add.Tensor", "aten::threshold_backward")), "skip", (), (), False,
     "captured op: aten::threshold_backward"),
    (BACKEND, breq("TestGradients::test_fn_gradgrad", ops=("add",)), "skip", (), (), False,
     "needs double_backward"),
    (BACKEND, breq(source="opt = torch.compile(fn)\n"), "skip", (), (), False, "excludes"),
    (PLAIN, breq(source="opt = torch.compile(fn)\n"), "skip", (), (), False, "needs the compile hook"),
    (PLAIN, breq(source="s = x.to_sparse()\n"), "skip", (), (), False, "needs the sparse hook"),
    # A plain test that names no device runs on CPU on the backend's CI too: a hook the backend
    # lacks cannot fail it (upstream test_out_dtype_op's torch.export tests pass on OpenReg)...
    (PLAIN, breq(source="def test_a(self):\n    ep = torch.export.export(m, (x,))\n", cpu_outcomes=("passed",)),
     "mandatory_success", (), (), True, "it runs on CPU only (not device-generic, names no device)"),
    # ... but not one that reaches a device, or failed on CPU, or never ran there.
    (PLAIN, breq(source="def test_a(self):\n    ep = torch.export.export(m.to('cuda'), (x,))\n",
                 cpu_outcomes=("passed",)), "skip", (), (), False, "needs the export hook"),
    (PLAIN, breq(source="def test_a(self, device):\n    ep = torch.export.export(m, (x,))\n",
                 cpu_outcomes=("passed",)), "skip", (), (), False, "needs the export hook"),
    (PLAIN, breq(source="def test_a(self):\n    ep = torch.export.export(m, (x,))\n"), "skip", (), (), False,
     "needs the export hook"),
    # sparse_dim() answers 0 for a dense tensor: calling it is no need for sparse (issue 22).
    (PLAIN, breq(aten_ops=("aten::sparse_dim", "aten::add.Tensor")), "mandatory_success", (), (), False, "Mandatory"),
    (PLAIN, breq(aten_ops=("aten::_sparse_coo_tensor_with_dims_and_tensors",)), "skip", (), (), False,
     "needs the sparse hook"),
    # A sparse tensor made by a dense op (embedding_bag's sparse=True) shows only in the call keys:
    # OpenReg's test_embedding_bag_1D_padding_idx was xfail_strict beside 2D's skip.
    (replace(PLAIN, hooks=("eager_ops", "autograd")), breq(aten_ops=("aten::_embedding_bag_backward", "aten::sparse_dim"),
                 layout_ops=("aten::_indices[sparse_coo]",)), "skip", (), (), False,
     "needs the sparse hook (captured op: aten::_indices[sparse_coo])"),
    # Every instance the capture ran on CPU failed: the test fails upstream too (numpy 2 removed
    # np.msort), whatever the device does; an instance CPU skipped says nothing.
    (BACKEND, breq(cpu_outcomes=("failed", "failed", "skipped"), aten_ops=("aten::sort",),
                   cpu_failure="AttributeError: module 'numpy' has no attribute 'msort'"), "xfail", (), (), False,
     "fails on CPU too, the reference device: all 2 instances the capture ran there failed (`AttributeError: module"),
    # Some instances fail on CPU beside passing ones (test_subclass's test_serialization: torch.load
    # refuses 7 of 8 subclasses): red on any device, so not mandatory; which ones is for review.
    (BACKEND, breq(cpu_outcomes=("failed", "passed", "failed"), aten_ops=("aten::add.Tensor",),
                   cpu_failure="UnpicklingError: Weights only load failed"), "xfail", (), (), True,
     "fails on CPU too, the reference device: 2 of the 3 instances the capture ran there failed (`UnpicklingError: "
     "Weights only load failed`), beside 1 passing one; those fail whatever curatedev does."),
    # ... unless the edits leave out every instance that failed there (corpus test_batch_vs_slicing:
    # frexp's, excluded for the device's missing kernel): the CPU says nothing of the others.
    (BACKEND, breq(ops=("add", "rsub"), dtypes=("float32",), cpu_outcomes=("failed", "passed"),
                   cpu_failed=(("float32", "rsub", ""),)), "mandatory_success", (), ("rsub",), False,
     "ops rsub excluded as known unsupported"),
    (BACKEND, breq(ops=("add", "rsub"), dtypes=("float32",), cpu_outcomes=("failed", "passed"),
                   cpu_failed=(("float32", "add", ""),)), "xfail", (), ("rsub",), True, "fails on CPU too"),
    # ... but a test the device cannot run stays skipped.
    (PLAIN, breq(cpu_outcomes=("failed", "passed"), aten_ops=("aten::_sparse_coo_tensor_with_dims_and_tensors",)),
     "skip", (), (), False, "needs the sparse hook"),
    (BACKEND, breq(cpu_outcomes=("skipped",), aten_ops=("aten::add.Tensor",)), "mandatory_success", (), (), False,
     "Mandatory"),
    (PLAIN, breq(source="q = torch.quantize_per_tensor(x, 0.1, 0, torch.quint8)\n"), "skip", (), (), False,
     "needs the quantized hook"),
    (PLAIN, breq(source="n = torch.nested.nested_tensor([a, b])\n"), "skip", (), (), False, "nested hook"),
    (PLAIN, breq(source="x = torch.randn(3, dtype=torch.cfloat)\n"), "skip", (), (), False, "complex hook"),
    # Another device's dtype list (issue 9: @dtypesIfMPS(... cfloat ...) read as "needs complex")
    (PLAIN, breq(decorators=("@dtypesIfMPS(*all_mps_types_and(torch.cfloat, torch.bool))", "@dtypes(torch.float32)"),
                 source="@dtypesIfMPS(*all_mps_types_and(torch.cfloat,\n    torch.bool))\n@dtypes(torch.float32)\n"
                        "def test_a(self, device, dtype):\n    pass\n", aten_ops=("aten::add.Tensor",)),
     "mandatory_success", (), (), False, "Mandatory"),
    (PLAIN, breq(decorators=("@dtypesIfPRIVATEUSE1(torch.cfloat)", "@dtypes(torch.float32)")), "skip", (), (), False,
     "complex hook"),
    (PLAIN, breq(source="import torch.distributed as dist\n"), "skip", (), (), False, "distributed hook"),
    (BACKEND, breq(decorators=("@deviceCountAtLeast(2)",)), "skip", (), (), False, "needs multi_device"),
    (BACKEND, breq(aten_ops=("aten::add.Tensor", "aten::cumsum.out")), "skip", (), (), False,
     "calls aten::cumsum.out, known unsupported"),
    (BACKEND, breq(ops=("rsub",), aten_ops=()), "skip", (), (), False, "every op it is parametrized over"),
    (BACKEND, breq(ops=("add", "rsub"), dtypes=("float32",)), "mandatory_success", (), ("rsub",), False,
     "ops rsub excluded as known unsupported"),
    (replace(PLAIN, supported_ops={"add": None}), breq(ops=("add", "mul", "div")), "mandatory_success", (), (), False,
     "2 undeclared op(s) left to the global supported_ops filter"),
    (BACKEND, breq(dtypes=("float32", "float64", "complex64", "float16")), "mandatory_success",
     ("complex64", "float16", "float64"), (), True, "dtypes float64 excluded (preference"),
    (BACKEND, breq(dtypes=("float64", "complex128")), "skip", (), (), False, "none of its dtypes is usable"),
    (BACKEND, breq(dtypes=("float32", "uint8"), aten_ops=("aten::add.Tensor",)), "mandatory_success", (), (), False,
     "Mandatory"),  # uint8 is undeclared: left to the global filter, not an edit
    (PLAIN, breq(similar=(SimilarTest("TestX::test_b", "skip", "Skip: needs distributed.", 0.93),
                          SimilarTest("TestX::test_c", "skip", "Skip: needs distributed.", 0.88),
                          SimilarTest("TestX::test_d", "mandatory_success", "ok", 0.80))),
     "skip", (), (), True, "2 of 3 close neighbours are skip"),
    (PLAIN, breq(similar=(SimilarTest("TestX::test_b", "xfail_strict", "fails", 0.95),
                          SimilarTest("TestX::test_c", "xfail_strict", "fails", 0.9))),
     "xfail", (), (), True, "are xfail"),
    (PLAIN, breq(similar=(SimilarTest("TestX::test_b", "skip", "s", 0.5),)), "mandatory_success", (), (), True,
     "to be confirmed by execution"),
    (PLAIN, breq(aten_ops=("aten::add.Tensor",), similar=(SimilarTest("TestX::test_b", "skip", "s", 0.99),
                                                         SimilarTest("TestX::test_c", "skip", "s", 0.99))),
     "mandatory_success", (), (), False, "none of the 1 ATen ops"),
    (FALLBACK, breq(), "mandatory_success", (), (), False, "fallback"),
    (PLAIN, breq(), "mandatory_success", (), (), True, "no known blocker; to be confirmed by execution"),
    (NO_HOOKS, breq(source="x.sum().backward()\n"), "mandatory_success", (), (), True, "no known blocker"),
]


@pytest.mark.parametrize(("backend", "request_", "mode", "dtypes", "ops", "review", "fragment"), BUCKET_CASES)
def test_bucket_rules(backend: BackendContext, request_: BucketRequest, mode: str, dtypes: tuple[str, ...],
                      ops: tuple[str, ...], review: bool, fragment: str) -> None:
    [record] = brain().bucket([request_], ctx(backend))
    assert (record.test, record.mode, record.exclude_dtypes, record.exclude_ops) == (request_.test, mode, dtypes, ops)
    assert record.needs_review is review
    assert fragment in record.reason, record.reason
    assert record.evidence and record.brain == "offline" and record.prompt_hash == RULES_HASH


def test_bucket_dtype_exclusions_name_why() -> None:
    [record] = brain().bucket([breq(dtypes=("float32", "float16", "complex64"))], ctx(replace(BACKEND, preferences=())))
    assert record.exclude_dtypes == ("complex64", "float16")
    assert "float16 excluded (known unsupported)" in record.reason
    assert "complex64 excluded (no complex hook)" in record.reason


# --- stage 4: refine -----------------------------------------------------------------------

OPS_TEST = breq("TestCommon::test_compare_cpu", ops=("add", "mul"), dtypes=("float32", "bfloat16"))
PLAIN_TEST = breq("TestTensorBasics::test_zeros", aten_ops=("aten::zeros", "aten::add.Tensor"))


def prev(test: BucketRequest, mode: str = "mandatory_success", **kw: object) -> Decision:
    return Decision(test=test.test, mode=mode, reason="Earlier reason.", evidence=("e",),  # type: ignore[arg-type]
                    brain="llm", prompt_hash="p", **kw)  # type: ignore[arg-type]


def rec(variant: str, *outcomes: str, dtype: str | None = None, op: str | None = None, cls: str | None = None,
        msg: str = "", op_variant: str | None = None) -> ExecutionRecord:
    return ExecutionRecord(variant, outcomes, dtype=dtype, op=op, failure_class=cls, message=msg, op_variant=op_variant)


P_F32 = rec("test_compare_cpu_add_curatedev_float32", "passed", dtype="float32", op="add")
P_F32_MUL = rec("test_compare_cpu_mul_curatedev_float32", "passed", dtype="float32", op="mul")
F_BF16 = rec("test_compare_cpu_add_curatedev_bfloat16", "failed", "failed", dtype="bfloat16", op="add",
             cls="numerical_mismatch", msg=MSG_CLOSE)
F_BF16_MUL = rec("test_compare_cpu_mul_curatedev_bfloat16", "failed", "failed", dtype="bfloat16", op="mul",
                 cls="numerical_mismatch", msg=MSG_CLOSE)
F_MUL_OP = rec("test_compare_cpu_mul_curatedev_float32", "failed", "failed", dtype="float32", op="mul",
               cls="unsupported_op", msg=MSG_OP)
P_BF16_MUL = rec("test_compare_cpu_mul_curatedev_bfloat16", "passed", dtype="bfloat16", op="mul")
X_BF16 = rec("test_compare_cpu_add_curatedev_bfloat16", "xfailed", dtype="bfloat16", op="add")
F_MUL_FLOOR = rec("test_compare_cpu_mul_floor_curatedev_float32", "failed", "failed", dtype="float32", op="mul",
                  op_variant="floor", msg=MSG_CLOSE)
F_MUL_FLOOR_BF16 = rec("test_compare_cpu_mul_floor_curatedev_bfloat16", "failed", "failed", dtype="bfloat16", op="mul",
                       op_variant="floor", msg=MSG_CLOSE)
P_PLAIN = rec("test_zeros_curatedev", "passed")
F_PLAIN = rec("test_zeros_curatedev", "failed", "failed", cls="unsupported_op", msg=MSG_OP)
F_DTYPE = rec("test_zeros_curatedev", "failed", dtype=None, cls="unsupported_dtype", msg=MSG_DTYPE)
CRASH = rec("test_zeros_curatedev", "crashed", cls="crash", msg=MSG_SEGV)
HANG = rec("test_zeros_curatedev", "timeout", cls="timeout", msg=MSG_TIMEOUT)
FLAKY = rec("test_zeros_curatedev", "failed", "passed", cls="transient", msg=MSG_CLOSE)
SHAKY = rec("test_zeros_curatedev", "passed", "failed", cls="numerical_mismatch", msg=MSG_CLOSE)
INFRA = rec("test_zeros_curatedev", "error", "error", cls="infrastructure", msg=MSG_INFRA)
SKIPPED = rec("test_zeros_curatedev", "skipped", msg=MSG_SKIP)
XPASS = rec("test_zeros_curatedev", "xpassed", "xpassed")
XFAILED = rec("test_zeros_curatedev", "xfailed", cls="unsupported_op", msg=MSG_OP)
PAIR_64_F32 = rec("test_set_curatedev_complex64_float32", "passed", dtype="complex64_float32")
PAIR_64_BOOL = rec("test_set_curatedev_complex64_bool", "passed", dtype="complex64_bool")
PAIR_128_F32 = rec("test_set_curatedev_complex128_float32", "failed", "failed", dtype="complex128_float32",
                   cls="unsupported_dtype", msg=MSG_DTYPE)
PAIR_128_BOOL = rec("test_set_curatedev_complex128_bool", "failed", "failed", dtype="complex128_bool",
                    cls="unsupported_dtype", msg=MSG_DTYPE)

REFINE_CASES = [
    # (request, previous mode, records) -> (mode, exclude_dtypes, exclude_ops, needs_review, missing, fragment)
    (PLAIN_TEST, "mandatory_success", (F_PLAIN,), "xfail_strict", (), (), False, (),
     "unsupported_op (`NotImplementedError: Could not run 'aten::add.out'"),
    (PLAIN_TEST, "mandatory_success", (F_DTYPE,), "xfail_strict", (), (), False, (), "unsupported_dtype"),
    (PLAIN_TEST, "xfail", (XFAILED,), "xfail_strict", (), (), False, (), "unexpected pass will signal promotion"),
    (PLAIN_TEST, "xfail", (XFAILED,), "xfail_strict", (), (), False, (), "every variant xfailed on every attempt"),
    # Upstream's own expected failure (mul in bfloat16) beside passes: kept, not excluded, as
    # an xfail leaves a mandatory test green (upstream test_testing's subtest expectedFailure).
    (OPS_TEST, "mandatory_success", (P_F32, P_F32_MUL, P_BF16_MUL, X_BF16), "mandatory_success", (), (), False, (),
     "all 3 variants passed on every attempt; 1 other variant xfailed on every attempt: upstream expects it to fail"),
    # ... but not beside failures alone: then they fail with the rest.
    (OPS_TEST, "mandatory_success", (F_MUL_OP, F_BF16_MUL, X_BF16), "xfail_strict", (), (), False, (),
     "every variant failed on every attempt"),
    (OPS_TEST, "mandatory_success", (P_F32, P_F32_MUL, F_BF16, F_BF16_MUL), "mandatory_success", ("bfloat16",), (),
     False, (), "bfloat16 excluded (test_compare_cpu_add_curatedev_bfloat16 failed on every attempt with "
     "numerical_mismatch (`AssertionError: Tensor-likes are not close!`)"),
    # No dtype and no op alone separates the failures, each op at its one dtype does: those two
    # go, the test stays mandatory for the rest (OpenReg: 4 of test_fn_gradgrad's 649 variants).
    (OPS_TEST, "mandatory_success", (P_F32, F_MUL_OP, F_BF16, P_BF16_MUL), "mandatory_success", (),
     ("add@bfloat16", "mul@float32"), False, (), "with ops add in bfloat16, mul in float32 excluded"),
    # ... but not where a variant of the same op at the same dtype passes (another parameter).
    (OPS_TEST, "mandatory_success", (P_F32, F_MUL_OP, P_BF16_MUL,
                                     rec("test_compare_cpu_mul_curatedev_float32_b", "passed", dtype="float32", op="mul")),
     "xfail", (), (), True, ("which variants fail, as a dtype, op, module or parameter split",),
     "no dtype, op, module or parameter value separates them"),
    # An OpInfo's variant fails where its op's other variants pass (upstream div_floor_rounding
    # beside div_no_rounding_mode, test_fn_grad on OpenReg): that variant goes, by the name the
    # config and the test carry; at the one dtype where only that dtype fails.
    (OPS_TEST, "mandatory_success", (P_F32, P_F32_MUL, P_BF16_MUL, F_MUL_FLOOR, F_MUL_FLOOR_BF16), "mandatory_success",
     (), ("mul_floor",), False, (), "with ops mul_floor excluded (test_compare_cpu_mul_floor_curatedev_float32 failed"),
    (OPS_TEST, "mandatory_success", (P_F32, P_F32_MUL, P_BF16_MUL, F_MUL_FLOOR,
                                     rec("test_compare_cpu_mul_floor_curatedev_bfloat16", "passed", dtype="bfloat16",
                                         op="mul", op_variant="floor")),
     "mandatory_success", (), ("mul_floor@float32",), False, (), "with ops mul_floor in float32 excluded"),
    # A variant's crash excludes that variant, not its op.
    (OPS_TEST, "mandatory_success", (P_F32, P_F32_MUL, P_BF16_MUL,
                                     rec("test_compare_cpu_mul_floor_curatedev_float32", "crashed", dtype="float32",
                                         op="mul", op_variant="floor", cls="crash", msg=MSG_SEGV),
                                     rec("test_compare_cpu_mul_floor_curatedev_bfloat16", "passed", dtype="bfloat16",
                                         op="mul", op_variant="floor")),
     "mandatory_success", (), ("mul_floor@float32",), False, (), "mul_floor in float32 excluded"),
    (OPS_TEST, "mandatory_success", (P_F32, F_MUL_OP, rec("x_mul_bf16", "failed", dtype="bfloat16", op="mul",
                                                           cls="unsupported_op", msg=MSG_OP)),
     "mandatory_success", (), ("mul",), False, (), "ops mul excluded"),
    (PLAIN_TEST, "mandatory_success", (CRASH,), "skip", (), (), False, (),
     "crashed (`Fatal Python error: Segmentation"),
    (PLAIN_TEST, "mandatory_success", (HANG,), "skip", (), (), False, (), "timed out (`Timeout (0:05:00)!`)"),
    (OPS_TEST, "mandatory_success", (P_F32, P_F32_MUL, rec("v_bf16", "crashed", dtype="bfloat16", cls="crash",
                                                           msg=MSG_SEGV)),
     "mandatory_success", ("bfloat16",), (), False, (), "v_bf16 crashed with crash"),
    # One op crashes in one dtype, its other dtype passes: no dimension explains it; the op
    # goes in that dtype only (the config's op with dtypes), the other ops' variants stay
    # (OpenReg: masked.std complex128 segfaults; skipping test_reference_masked lost 40 passes).
    (OPS_TEST, "mandatory_success", (P_F32, P_F32_MUL, P_BF16_MUL, rec("x_add_c128", "passed", dtype="complex128", op="add"),
                                     rec("x_mul_c128", "crashed", dtype="complex128", op="mul", cls="crash", msg=MSG_SEGV)),
     "mandatory_success", (), ("mul@complex128",), False, (),
     "with ops mul in complex128 excluded (x_mul_c128 crashed with crash"),
    # Two ops each crashing in a dtype the other passes in: each goes in its own dtype.
    (OPS_TEST, "mandatory_success", (rec("x_add_c64", "crashed", dtype="complex64", op="add", cls="crash", msg=MSG_SEGV),
                                     rec("x_add_c128", "passed", dtype="complex128", op="add"),
                                     rec("x_mul_c64", "passed", dtype="complex64", op="mul"),
                                     rec("x_mul_c128", "crashed", dtype="complex128", op="mul", cls="crash", msg=MSG_SEGV)),
     "mandatory_success", (), ("add@complex64", "mul@complex128"), False, (), "ops add in complex64, mul in complex128"),
    # ... but not when no passing variant would be left: an op crashing in all its dtypes goes
    # whole, and then nothing passes.
    (OPS_TEST, "mandatory_success", (rec("x_add_c64", "crashed", dtype="complex64", op="add", cls="crash", msg=MSG_SEGV),
                                     rec("x_add_c128", "crashed", dtype="complex128", op="add", cls="crash", msg=MSG_SEGV)),
     "skip", (), (), False, (), "x_add_c64 crashed"),
    (PLAIN_TEST, "mandatory_success", (FLAKY,), "mandatory_success", (), (), True, ("stable results over more runs",),
     "flaky"),
    (PLAIN_TEST, "mandatory_success", (SHAKY,), "xfail", (), (), True, ("stable results over more runs",),
     "failed on its last attempt after passing"),
    (PLAIN_TEST, "mandatory_success", (INFRA,), "mandatory_success", (), (), True,
     ("a rerun free of infrastructure errors",), "infrastructure error (`OSError: [Errno 98]"),
    (PLAIN_TEST, "xfail_strict", (INFRA,), "xfail_strict", (), (), True, ("a rerun free of infrastructure errors",),
     "Xfail strict kept"),
    # A brain's xfail that every variant disproves is promoted (issue 9: it stayed xfail).
    (PLAIN_TEST, "xfail", (P_PLAIN,), "mandatory_success", (), (), False, (), "promoted from xfail"),
    (PLAIN_TEST, "xfail", (XPASS,), "mandatory_success", (), (), False, (), "promoted from xfail"),
    # Dtype pairs (@dtypes(*product(...))): the member every failing variant has separates them.
    (OPS_TEST, "mandatory_success", (PAIR_64_F32, PAIR_64_BOOL, PAIR_128_F32, PAIR_128_BOOL), "mandatory_success",
     ("complex128",), (), False, (), "dtypes complex128 excluded"),
    (PLAIN_TEST, "xfail_strict", (P_PLAIN,), "mandatory_success", (), (), False, (), "promoted from xfail_strict"),
    (PLAIN_TEST, "mandatory_success", (P_PLAIN,), "mandatory_success", (), (), False, (), "confirmed on the device"),
    (PLAIN_TEST, "mandatory_success", (SKIPPED,), "skip", (), (), False, (),
     "skipped on the device by the test itself"),
    # Skipped by the draft config's own exclusion, not by the test (issue 22: that was called
    # "skipped on the device by the test itself (no reason given)").
    (PLAIN_TEST, "mandatory_success", (rec("test_zeros_curatedev_float64", "skipped",
                                           msg="dtype float64 excluded by edits (/s/exec_config/t.yaml:9:11)"),
                                       rec("test_zeros_curatedev_complex64", "skipped",
                                           msg="dtype complex64 is not in supported_dtypes (/s/exec_config/t.yaml)")),
     "skip", (), (), False, (), "skipped by the draft config itself, never run on the device: `dtype float64 excluded "
     "by edits` (the draft's own edit of this test); `dtype complex64 is not in supported_dtypes` "
     "(the profile's declared capabilities)"),
    (PLAIN_TEST, "skip", (P_PLAIN,), "skip", (), (), True, ("promotion proposed: passes on the device",),
     "Earlier reason."),
    (breq("TestX::test_calls_gap", aten_ops=("aten::_scaled_mm",)), "xfail_strict", (P_PLAIN,), "xfail", (), (),
     True, ("check the backend's declared gaps",), "declares aten::_scaled_mm unsupported"),
    # A mandatory decision made before the gap was known is re-bucketed first (skip), then
    # the pass only proposes promotion.
    (breq("TestX::test_calls_gap", aten_ops=("aten::_scaled_mm",)), "mandatory_success", (P_PLAIN,), "skip", (), (),
     True, ("promotion proposed: passes on the device",), "known unsupported"),
]


@pytest.mark.parametrize(("request_", "before", "records", "mode", "dtypes", "ops", "review", "missing", "fragment"),
                         REFINE_CASES)
def test_refine_rules(request_: BucketRequest, before: str, records: tuple[ExecutionRecord, ...], mode: str,
                      dtypes: tuple[str, ...], ops: tuple[str, ...], review: bool, missing: tuple[str, ...],
                      fragment: str) -> None:
    [record] = brain().refine([RefineRequest(request_, prev(request_, before), records)], ctx())
    assert (record.mode, record.exclude_dtypes, record.exclude_ops) == (mode, dtypes, ops)
    assert (record.needs_review, record.missing) == (review, missing)
    assert fragment in record.reason, record.reason
    assert record.brain == "offline" and record.evidence


def test_refine_keeps_the_finding_that_it_fails_on_cpu_too() -> None:
    """The bucket stage saw every CPU instance fail; the device fails it too: the reason says
    both, so nobody reads it as the backend's gap."""
    [static] = brain().bucket([breq(cpu_outcomes=("failed",), cpu_failure="AssertionError: 3.0 != 2.0")], ctx())
    failed = rec("test_a_curatedev", "failed", "failed", cls="numerical_mismatch", msg=MSG_CLOSE)
    [record] = brain().refine([RefineRequest(breq(), static, (failed,))], ctx())
    # Not strict: an upstream failure passes or fails with the order the tests run in.
    assert record.mode == "xfail"
    assert "as on CPU, the reference device (1 of 1 instance failed): the failure is not the backend's" in record.reason
    assert "not strict: a pass of an upstream failure says nothing of the backend" in record.reason


def test_refine_keeps_the_cpu_finding_beside_an_exclusion() -> None:
    """Some CPU instances failed (the bucket stage: xfail); on the device only bfloat16 fails:
    the exclusion's reason still says CPU failed too (upstream test_scatter_reduce_sum)."""
    req = breq(dtypes=("float32", "bfloat16"), cpu_outcomes=("passed", "failed"), cpu_failure="AssertionError: 0.125")
    [static] = brain().bucket([req], ctx())
    assert static.mode == "xfail"
    failed = rec("test_a_curatedev_bfloat16", "failed", "failed", dtype="bfloat16", cls="numerical_mismatch", msg=MSG_CLOSE)
    passed = rec("test_a_curatedev_float32", "passed", dtype="float32")
    [record] = brain().refine([RefineRequest(req, static, (failed, passed))], ctx())
    assert (record.mode, record.exclude_dtypes) == ("mandatory_success", ("bfloat16",))
    assert "; on CPU, the reference device, 1 of 2 instances failed too)" in record.reason, record.reason


def test_refine_only_proposes_promoting_a_decision_from_the_config() -> None:
    """A config's xfail may be a person's: passing variants propose, they do not promote."""
    earlier = replace(prev(PLAIN_TEST, "xfail"), brain=CONFIG_BRAIN)
    [record] = brain().refine([RefineRequest(PLAIN_TEST, earlier, (P_PLAIN,))], ctx())
    assert (record.mode, record.needs_review, record.missing) == ("xfail", True, ("promotion proposed: passes consistently",))


def test_refine_without_records_keeps_previous_verbatim() -> None:
    earlier = prev(PLAIN_TEST, "xfail", exclude_dtypes=("float64",))
    assert brain().refine([RefineRequest(PLAIN_TEST, earlier, ())], ctx()) == [earlier]


def test_refine_without_previous_buckets_first() -> None:
    request = breq(ops=("add", "rsub"), dtypes=("float32",))
    [record] = brain().refine([RefineRequest(request, None, (rec("v", "passed", dtype="float32", op="add"),))], ctx())
    assert record.mode == "mandatory_success" and record.exclude_ops == ("rsub",)
    assert brain().refine([RefineRequest(request, None, ())], ctx()) == brain().bucket([request], ctx())


def test_refine_keeps_earlier_edits() -> None:
    earlier = prev(OPS_TEST, exclude_dtypes=("float64",))
    [record] = brain().refine([RefineRequest(OPS_TEST, earlier, (P_F32, P_F32_MUL, F_BF16, F_BF16_MUL))], ctx())
    assert record.exclude_dtypes == ("bfloat16", "float64")


# --- rails, registry, determinism ----------------------------------------------------------

def _named(requests: list[BucketRequest]) -> list[BucketRequest]:
    # One name per request: the table reuses default names.
    return [replace(r, test=f"TestT{i}::{r.test.split('::')[1]}") for i, r in enumerate(requests)]


BACKENDS = (BACKEND, PLAIN, NO_HOOKS, FALLBACK, CUDA)
ALL_BUCKET = _named([case[1] for case in BUCKET_CASES] + [OPS_TEST, PLAIN_TEST])
ALL_RECORDS = [case[2] for case in REFINE_CASES] + [(INFRA, P_PLAIN), (SKIPPED, SKIPPED), (F_BF16, INFRA)]


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
def test_outputs_pass_the_rails(backend: BackendContext, tmp_path: Path) -> None:
    known = frozenset(r.test for r in ALL_BUCKET)
    c = ctx(backend, known, tmp_path)
    offline = brain()
    decisions = offline.bucket(ALL_BUCKET, c)
    assert rails.check_bucket(decisions, ALL_BUCKET, known, backend) == []
    refine = [RefineRequest(r, previous, records) for i, r in enumerate(ALL_BUCKET)
              for previous in (None, *(prev(r, m) for m in ("mandatory_success", "xfail", "xfail_strict", "skip")))
              for records in ALL_RECORDS[i % 3::3]]
    for start in range(0, len(refine), len(ALL_BUCKET)):
        batch = _dedupe(refine[start:start + len(ALL_BUCKET)])
        assert rails.check_bucket(offline.refine(batch, c), batch, known, backend) == []
    scope = [ScopeRequest(case[1], case[2], case[3], case[4]) for case in SCOPE_CASES]  # type: ignore[arg-type]
    scope = list({r.path: r for r in scope}.values())
    assert rails.check_scope(offline.scope(scope, c), scope, tmp_path) == []


def _dedupe(batch: list[RefineRequest]) -> list[RefineRequest]:
    return list({r.test: r for r in batch}.values())


def test_every_refine_combination_passes_the_rails() -> None:
    # Each (test, previous mode, records) alone: a batch of one so no case hides another.
    known = frozenset(r.test for r in ALL_BUCKET)
    offline = brain()
    for backend in (BACKEND, PLAIN):
        for request in ALL_BUCKET[::3]:
            for mode in ("mandatory_success", "xfail", "xfail_strict", "skip"):
                for records in ALL_RECORDS:
                    req = RefineRequest(request, prev(request, mode), records)
                    assert rails.check_bucket(offline.refine([req], ctx(backend)), [req], known, backend) == [], req


def test_registry_builds_the_offline_brain() -> None:
    made = make_brain("offline", BrainSettings())
    assert isinstance(made, OfflineBrain) and made.name == "offline" and made.usage.as_dict()["calls"] == 0


def test_same_inputs_same_records_in_any_order() -> None:
    c = ctx()
    first = brain().bucket(ALL_BUCKET, c)
    assert to_json(brain().bucket(ALL_BUCKET, c)) == to_json(first)
    shuffled = ALL_BUCKET[:]
    random.Random(7).shuffle(shuffled)
    by_test = {d.test: d for d in brain().bucket(shuffled, c)}
    assert [by_test[d.test] for d in first] == first
    requests = [RefineRequest(OPS_TEST, prev(OPS_TEST), (P_F32, P_F32_MUL, F_BF16, F_BF16_MUL))]
    assert to_json(brain().refine(requests, c)) == to_json(brain().refine(requests, c))
    scope = [ScopeRequest(case[1], case[2], case[3], case[4]) for case in SCOPE_CASES]  # type: ignore[arg-type]
    assert brain().scope(scope, c) == brain().scope(scope, c)


def test_refine_excludes_a_failing_module_and_keeps_the_rest() -> None:
    """@modules tests: a module whose every variant fails is excluded, like a dtype or op."""
    from testcurator.agents.brain import BackendContext, BrainContext, BucketRequest, ExecutionRecord, RefineRequest
    from testcurator.agents.decision import Decision
    from testcurator.agents.offline.brain import OfflineBrain

    def rec(module: str, outcome: str) -> ExecutionRecord:
        return ExecutionRecord(f"t.py::TestModuleDEV::test_sd_{module}_dev_float32", (outcome, outcome), "float32",
                               None, module, "unknown" if outcome == "failed" else None,
                               "RuntimeError: Attempted to set the storage" if outcome == "failed" else "")

    prev = Decision("TestModule::test_sd", "mandatory_success", "no blocker", (), "offline", None)
    request = RefineRequest(BucketRequest("TestModule::test_sd", "t.py", "h"), prev,
                            (rec("nn.LayerNorm", "failed"), rec("nn.Linear", "passed")))
    ctx = BrainContext(BackendContext(name="dev", device="dev"), frozenset({"TestModule::test_sd"}), Path("."))
    decision = OfflineBrain().refine([request], ctx)[0]
    assert decision.mode == "mandatory_success"
    assert decision.exclude_modules == ("nn.LayerNorm",)
    assert "modules nn.LayerNorm excluded" in decision.reason


def test_a_test_the_draft_never_instantiated_is_said_to_be_absent() -> None:
    """Its file ran on the device and collected no variant of it (only_for=("cpu", "cuda")):
    the reason says so, instead of a guess such as "it needs sparse" (issue 22)."""
    from testcurator.agents.refine import refine_tests
    from testcurator.vocab import TestKey

    here, absent = breq("TestX::test_a"), breq("TestX::test_cpu_cuda_only", aten_ops=("aten::sparse_dim",))
    previous = [prev(here), prev(absent, "skip")]
    executions = {TestKey.of("test_x.py", "TestX::test_a"): [rec("test_a_curatedev", "passed")]}
    got = {d.test: d for d in refine_tests(brain(), ctx(), [here, absent], previous, executions)}
    assert got["TestX::test_a"].mode == "mandatory_success"
    gone = got["TestX::test_cpu_cuda_only"]
    assert (gone.mode, gone.brain) == ("skip", "execution")
    assert gone.reason.startswith("Skip: PyTorch instantiates no variant of it for curatedev")
    # A file the draft did not run at all says nothing about its tests.
    other = refine_tests(brain(), ctx(), [breq("TestY::test_b", file="test_y.py")], [], executions)
    assert other[0].brain == "offline"
