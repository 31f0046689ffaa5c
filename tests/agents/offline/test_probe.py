"""The offline brain's probe rule: what the device's capability table says about the calls a
test made decides its prediction (a table of evidence -> expected decision)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from testcurator.agents.brain import (
    BackendContext, BrainContext, BrainSettings, BucketRequest, ExecutionRecord, RefineRequest,
)
from testcurator.agents.decision import Decision
from testcurator.agents.offline.brain import OfflineBrain
from testcurator.memory.capability import ProbedInstance, ProbeEvidence
from testcurator.plugin.callspec import raise_call

BACKEND = BackendContext(name="curatedev", device="curatedev", hooks=("eager_ops", "autograd"),
                         supported_dtypes=frozenset({"float32", "int64", "bool"}), has_fallback=True)
SORT = "aten::sort.values_stable(float32,int64,float32)"
SORT_I = "aten::sort.values_stable(int64,int64,int64)"
FLIP = "aten::flip(float32)"
MISSING = ("missing_kernel", "NotImplementedError: Could not run 'aten::sort.values_stable' with arguments from the "
           "'curatedev' backend.")
CRASH = ("crash", "the process died (signal SIGABRT)")
PIN = "aten::_pin_memory(float32)"
SEG, SEG_B = "aten::segment_reduce(float32,int64)", "aten::segment_reduce(bool,int64)"


def I(dtype: str, op: str | None, gaps: tuple[str, ...] = (), module: str | None = None) -> ProbedInstance:  # noqa: E743
    return ProbedInstance(dtype, op, module, gaps)


def decide(probe: ProbeEvidence | None, dtypes: tuple[str, ...] = ("float32", "int64"),
           ops: tuple[str, ...] = (), modules: tuple[str, ...] = (), backend: BackendContext = BACKEND,
           source: str = "") -> object:
    req = BucketRequest(test="TestSort::test_sort", file="test/test_sort.py", content_hash="h",
                        aten_ops=("aten::sort.values_stable", "aten::add.Tensor"), dtypes=dtypes, ops=ops,
                        modules=modules, probe=probe, source=source)
    return OfflineBrain(BrainSettings()).bucket([req], BrainContext(backend, frozenset(), Path("/tmp")))[0]


CASES = {
    "every instance lacks a kernel": (
        ProbeEvidence({SORT: MISSING, SORT_I: MISSING}, (I("float32", None, (SORT,)), I("int64", None, (SORT_I,))), 3),
        "xfail_strict", (), ()),
    "one dtype lacks it": (
        ProbeEvidence({SORT_I: MISSING}, (I("float32", None), I("int64", None, (SORT_I,))), 3),
        "mandatory_success", ("int64",), ()),
    "one OpInfo op lacks it": (
        ProbeEvidence({SORT: MISSING}, (I("float32", "sort", (SORT,)), I("float32", "add"), I("int64", "sort", (SORT,)),
                                        I("int64", "add"))), "mandatory_success", (), ("sort",)),
    "one ModuleInfo lacks it": (
        ProbeEvidence({SORT: MISSING}, (I("float32", None, (SORT,), "nn.LayerNorm"), I("float32", None, (), "nn.ReLU"))),
        "mandatory_success", (), ()),
    "a crashing call in every instance": (
        ProbeEvidence({FLIP: CRASH}, (I("float32", None, (FLIP,)), I("int64", None, (FLIP,)))), "xfail", (), ()),
    "a hanging call in every instance": (
        ProbeEvidence({FLIP: ("crash", "hang: no result after 60s")}, (I("float32", None, (FLIP,)),)), "skip", (), ()),
    "failures no dtype or op separates": (
        ProbeEvidence({SORT: MISSING}, (I("float32", None, (SORT,)), I("float32", None), I("int64", None))),
        "xfail", (), ()),
    "only an unsupported dtype's instance fails (left to the global filter)": (
        ProbeEvidence({"aten::abs(float64)": ("unsupported_dtype", "Double")},
                      (I("float32", None), I("float64", None, ("aten::abs(float64)",)))), "mandatory_success", (), ()),
    # @dtypes(*product(...)) instances carry a dtype pair, a name no dtype list holds: a pair
    # counts as supported when every member is (test_segment_reductions on curatedev).
    "every dtype pair instance lacks a kernel": (
        ProbeEvidence({SEG: MISSING, SEG_B: MISSING},
                      (I("float32_int64", None, (SEG,)), I("bool_int64", None, (SEG_B,)))), "xfail_strict", (), ()),
    "a dtype pair's member lacks it": (
        ProbeEvidence({SEG_B: MISSING}, (I("float32_int64", None), I("bool_int64", None, (SEG_B,)))),
        "mandatory_success", ("bool",), ()),
    "a pair with an unsupported member is left to the global filter": (
        ProbeEvidence({"aten::abs(float64)": ("unsupported_dtype", "Double")},
                      (I("float32_int64", None), I("float64_int64", None, ("aten::abs(float64)",)))),
        "mandatory_success", (), ()),
    # A call that crashes in one dtype, made by one op: the op goes in that dtype only. The
    # dtype is not blamed, though every known int64 instance fails: the other ops' int64
    # instances were not captured (upstream masked.std's aten::_conj in complex64, on OpenReg).
    "one OpInfo op crashes in one dtype": (
        ProbeEvidence({SORT_I: CRASH}, (I("float32", "sort"), I("float32", "add"), I("int64", "sort", (SORT_I,)))),
        "mandatory_success", (), ("sort@int64",)),
    # A dtype the device lacks is the dtype's, whichever op reaches it.
    "an op's instances of a dtype the device lacks": (
        ProbeEvidence({SORT_I: ("unsupported_dtype", "Long")},
                      (I("float32", "sort"), I("float32", "add"), I("int64", "sort", (SORT_I,)))),
        "mandatory_success", ("int64",), ()),
    "every call works": (ProbeEvidence({}, (I("float32", None), I("int64", None)), 7), "mandatory_success", (), ()),
    # A plain test (one instance, no dtype) whose host call fails: pinning without a pinned
    # host allocator for the backend's device (callspec.HOST_CALLS).
    "a plain test's failing host call": (
        ProbeEvidence({PIN: ("error", "NotImplementedError: You should register `PrivateUse1HooksInterface`")},
                      (ProbedInstance(None, None, None, (PIN,)),)), "xfail_strict", (), ()),
}


@pytest.mark.parametrize("probe, mode, dtypes, ops", CASES.values(), ids=CASES.keys())
def test_probe_rule(probe: ProbeEvidence, mode: str, dtypes: tuple[str, ...], ops: tuple[str, ...]) -> None:
    record = decide(probe, ops=("sort", "add") if ops else ())
    assert (record.mode, record.exclude_dtypes, record.exclude_ops) == (mode, dtypes, ops)
    if probe.gaps and mode != "mandatory_success" or dtypes or ops:
        shown = next(iter(probe.gaps))
        assert any(line.startswith(f"probe: {shown}") for line in record.evidence), record.evidence


def test_a_module_split_is_an_exclusion_and_earlier_exclusions_stay() -> None:
    record = decide(CASES["one ModuleInfo lacks it"][0], modules=("nn.LayerNorm", "nn.ReLU"))
    assert record.exclude_modules == ("nn.LayerNorm",)
    # float16 is a declared gap, excluded by the dtype rule before the probe rule decides: the
    # xfail_strict keeps that exclusion (as refine keeps it), and the probe judges float32 alone.
    gap = ProbeEvidence({SORT: MISSING}, (I("float32", None, (SORT,)), I("float16", None)))
    declared = BackendContext(name="curatedev", device="curatedev", unsupported_dtypes=frozenset({"float16"}))
    record = decide(gap, dtypes=("float32", "float16"), backend=declared)
    assert (record.mode, record.exclude_dtypes) == ("xfail_strict", ("float16",))


def test_the_reason_names_the_call_and_what_the_device_said() -> None:
    record = decide(CASES["every instance lacks a kernel"][0])
    assert SORT in record.reason and "missing_kernel" in record.reason and "Could not run" in record.reason


def test_without_probe_evidence_the_fallback_is_trusted_as_before() -> None:
    record = decide(None)
    assert record.mode == "mandatory_success" and "probe" not in record.reason


def test_all_calls_working_is_the_stated_basis() -> None:
    record = decide(CASES["every call works"][0])
    assert "ran on the device when the probe replayed them" in record.reason
    assert any(line.startswith("probe: all 7 distinct call(s)") for line in record.evidence)


def _module_split() -> tuple[Decision, Callable[[ExecutionRecord], Decision]]:
    """The bucket decision for a test whose nn.LayerNorm instances lack a kernel, and refine
    from one execution record of it."""
    brain, bctx = OfflineBrain(BrainSettings()), BrainContext(BACKEND, frozenset(), Path("/tmp"))
    req = BucketRequest(test="TestSort::test_sort", file="test/test_sort.py", content_hash="h",
                        modules=("nn.LayerNorm", "nn.ReLU"), dtypes=("float32",),
                        probe=CASES["one ModuleInfo lacks it"][0])
    (bucketed,) = brain.bucket([req], bctx)
    return bucketed, lambda rec: brain.refine([RefineRequest(req, bucketed, (rec,))], bctx)[0]


def test_an_op_excluded_in_one_dtype_is_said_so_before_and_after_execution() -> None:
    brain, bctx = OfflineBrain(BrainSettings()), BrainContext(BACKEND, frozenset(), Path("/tmp"))
    req = BucketRequest(test="TestSort::test_sort", file="test/test_sort.py", content_hash="h", ops=("sort", "add"),
                        dtypes=("float32", "int64"), probe=CASES["one OpInfo op crashes in one dtype"][0])
    (bucketed,) = brain.bucket([req], bctx)
    assert "with ops sort in int64 excluded (the probe found" in bucketed.reason
    ran = ExecutionRecord("test_sort_sort_curatedev_float32", ("passed",), dtype="float32", op="sort")
    (refined,) = brain.refine([RefineRequest(req, bucketed, (ran,))], bctx)
    assert (refined.mode, refined.exclude_ops) == ("mandatory_success", ("sort@int64",))
    assert f"The probe excluded op sort in int64 before execution ({SORT_I} failing on the device)." in refined.reason


def test_a_test_that_fails_as_a_whole_on_the_device_drops_the_probes_split() -> None:
    bucketed, refine = _module_split()
    assert bucketed.exclude_modules == ("nn.LayerNorm",)
    # The draft ran nn.ReLU only (nn.LayerNorm excluded), and it failed for a reason no call shows.
    relu = ExecutionRecord("test_sort_nn_ReLU_curatedev_float32", ("failed", "failed"), dtype="float32",
                           module="nn.ReLU", failure_class="unknown", message="RuntimeError: devices must match")
    refined = refine(relu)
    assert (refined.mode, refined.exclude_modules) == ("xfail_strict", ())


def test_a_confirmed_test_says_why_the_probe_excluded_what_it_did() -> None:
    bucketed, refine = _module_split()
    relu = ExecutionRecord("test_sort_nn_ReLU_curatedev_float32", ("passed",), dtype="float32", module="nn.ReLU")
    refined = refine(relu)
    # Only nn.ReLU ran: the reason still says why nn.LayerNorm is excluded.
    assert (refined.mode, refined.exclude_modules) == ("mandatory_success", ("nn.LayerNorm",))
    assert f"The probe excluded module nn.LayerNorm before execution ({SORT} failing on the device)." in refined.reason


# Upstream test_indexing / test_sort_and_select in our own words: device-generic tests whose
# calls all run on CPU, and one that does use its device.
UNUSED = """    def test_truncate(self, device):
        x = torch.randn(1, 4)
        x[range(1), range(1)] = torch.square(x[0, 0])
"""
NO_PARAM = """    @dtypes(torch.float32)
    def test_sort_stable_none(
        self,
    ):
        y = torch.ones(10).sort(stable=None).values
"""
USED = """    def test_sort(self, device):
        x = torch.ones(10, device=device)
        x.sort(stable=True)
"""
TYPE_USED = """    def test_sort(self, device):
        x = torch.ones(10).to(self.device_type)
"""
CPU_NAMED = """    def test_sort_cpu(self):
        x = make_tensor((5,), dtype=torch.float32, device="cpu")
        y = torch.ones(10, device=torch.device('cpu')).sort()
"""
CPU_AND_OWN = """    def test_sort(self, device):
        x = torch.ones(10, device="cpu").to(device)
"""


@pytest.mark.parametrize(("source", "mode"), [
    (UNUSED, "mandatory_success"), (NO_PARAM, "mandatory_success"), (USED, "xfail_strict"),
    (TYPE_USED, "xfail_strict"), (CPU_NAMED, "mandatory_success"), (CPU_AND_OWN, "xfail_strict"), ("", "xfail_strict"),
    ("    def test_sort(self, device):\n" + "        pass\n" * 70, "xfail_strict"),  # cut: not known
])
def test_a_test_that_never_uses_its_device_is_not_held_to_the_devices_gaps(source: str, mode: str) -> None:
    probe = ProbeEvidence({SORT: MISSING, SORT_I: MISSING}, (I("float32", None, (SORT,)), I("int64", None, (SORT_I,))), 3)
    got = decide(probe, source=source)
    assert got.mode == mode
    if mode == "mandatory_success":
        assert any("never uses its device" in e for e in got.evidence)


INDEX_PUT = "aten::index_put_(float32,bool,float32)"
INDEX_PUT_MISSING = ("missing_kernel", "NotImplementedError: Could not run 'aten::_index_put_impl_' with arguments "
                     "from the 'curatedev' backend.")


@pytest.mark.parametrize(("expects", "mode"), [
    ("with self.assertRaises(RuntimeError):\n            a[True] = b", "mandatory_success"),
    ("self.assertRaises(RuntimeError, lambda: a.__setitem__(True, b))", "mandatory_success"),
    ("with pytest.raises(RuntimeError):\n            a[True] = b", "mandatory_success"),
    # a message or another type: where the device stops decides, so the gap stands
    ("with self.assertRaisesRegex(RuntimeError, 'shape mismatch'):\n            a[True] = b", "xfail_strict"),
    ("with self.assertRaises(IndexError):\n            a[True] = b", "xfail_strict"),
    ("with pytest.raises(RuntimeError, match='shape'):\n            a[True] = b", "xfail_strict"),
    ("with self.assertRaises(RuntimeError):\n            a[True] = b\n"
     "        with self.assertRaisesRegex(IndexError, 'mask'):\n            a[m] = b", "xfail_strict"),
])
def test_a_call_made_to_raise_a_bare_runtime_error_is_no_gap(expects: str, mode: str) -> None:
    source = f"    def test_setitem_expansion_error(self, device):\n        a = torch.ones(2, device=device)\n        {expects}\n"
    probe = ProbeEvidence({INDEX_PUT: INDEX_PUT_MISSING},
                          (ProbedInstance(None, None, None, (INDEX_PUT,), (INDEX_PUT,)),), 4)
    assert decide(probe, dtypes=(), source=source).mode == mode
    made_to_work = ProbeEvidence({INDEX_PUT: INDEX_PUT_MISSING}, (ProbedInstance(None, None, None, (INDEX_PUT,)),), 4)
    assert decide(made_to_work, dtypes=(), source=source).mode == "xfail_strict"  # a gap it did not expect


def test_a_raising_twins_gap_is_named_as_the_call_and_its_raising_inputs() -> None:
    # upstream test_trivial_fancy_out_of_bounds: the bound check is in the kernel the device lacks
    twin = raise_call(SORT, "IndexError")
    record = decide(ProbeEvidence({twin: MISSING}, (I("float32", None, (twin,)),)))
    assert record.mode == "xfail_strict"
    assert f"replayed {SORT} (the inputs that raised IndexError on CPU) on curatedev: missing_kernel" in record.reason, record.reason
