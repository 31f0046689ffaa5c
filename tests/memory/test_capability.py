"""The capability table (per backend and torch version) and what it says about each test."""

from __future__ import annotations

from pathlib import Path

import pytest

from testcurator.memory.capability import (
    crash_dtypes,
    CapabilityTable, ProbedInstance, ProbeEvidence, backend_version, probe_evidence, read_probe_evidence, write_probe_evidence,
)
from testcurator.config.profile import BackendProfile
from testcurator.memory.opmap import OpMap
from testcurator.memory.run_identity import backend_digest
from testcurator.plugin.callspec import raise_call, write_call
from testcurator.plugin.oprecord import OpRecord
from testcurator.runner.probe.replay import ProbeResult
from testcurator.vocab import TestKey

SORT = "aten::sort.values_stable(int64,int64,int64)"
ADD = "aten::add.Tensor(float32,float32)"
PIN = "aten::_pin_memory(float32)"


def test_rows_are_kept_per_backend_and_torch_version(tmp_path: Path) -> None:
    with CapabilityTable(tmp_path, "b1", "2.13.0") as table:
        table.store([ProbeResult(SORT, "missing_kernel", "Could not run", 0.01), ProbeResult(ADD, "works")])
    with CapabilityTable(tmp_path, "b1", "2.13.0") as same:
        assert {k: r.status for k, r in same.results().items()} == {SORT: "missing_kernel", ADD: "works"}
        assert list(same.gaps()) == [SORT]
    for other in (CapabilityTable(tmp_path, "b2", "2.13.0"), CapabilityTable(tmp_path, "b1", "2.14.0")):
        with other:
            assert other.results() == {}


def test_backend_version_follows_the_profile_the_sources_and_the_behaviour_env(tmp_path: Path) -> None:
    profile, src = tmp_path / "backend.yaml", tmp_path / "csrc"
    src.mkdir()
    profile.write_text("name: x\ndevice: {kind: privateuse1, name: xdev}\n")
    (src / "kernels.cpp").write_text("// v1\n")
    model = BackendProfile(name="x", device={"kind": "privateuse1", "name": "xdev"})

    def version(environ: dict[str, str] | None = None) -> str:
        return backend_version(backend_digest(model, profile, [src], environ or {}))

    first = version()
    assert version({"UNRELATED": "1"}) == first
    (src / "kernels.cpp").write_text("// v2\n")
    second = version()
    profile.write_text("name: y\n")
    third = version()
    allowlist = version({"XDEV_ALLOWED_OPS": "add"})  # the device's own variables change what it does
    assert len({first, second, third, allowlist}) == 4


def test_probe_evidence_names_the_failing_calls_of_each_instance(tmp_path: Path) -> None:
    def rec(node: str, dtype: str, calls: tuple[str, ...], device: str | None = "cpu") -> OpRecord:
        return OpRecord(f"test/test_sort.py::TestSortCPU::{node}", "TestSort::test_sort", "captured", device=device,
                        dtype=dtype, calls=calls)

    capture = tmp_path / "cap.jsonl"
    capture.write_text("".join(r.to_json() + "\n" for r in (
        rec("test_sort_cpu_float32", "float32", (ADD,)), rec("test_sort_cpu_int64", "int64", (ADD, SORT)),
        rec("test_sort_cpu_int32", "int32", ("aten::abs(int32)",)),
        # A plain test (no device parameter) runs on CPU on any backend: no probe evidence...
        OpRecord("test/test_sort.py::TestPlain::test_cpu_only", "TestPlain::test_cpu_only", "captured", calls=(SORT,)),
        # ... except for its host calls: pinning goes through the backend loaded in the process.
        OpRecord("test/test_sort.py::TestPlain::test_pin", "TestPlain::test_pin", "captured", calls=(SORT, PIN)))))
    opmap = OpMap(tmp_path / "state")
    opmap.ingest(capture)
    results = {SORT: ProbeResult(SORT, "missing_kernel", "Could not run"), ADD: ProbeResult(ADD, "works"),
               PIN: ProbeResult(PIN, "error", "register PrivateUse1HooksInterface")}
    found = probe_evidence(opmap, results)
    # A delta run asks about its own tests only: the same evidence for them, nothing else.
    pin_only = probe_evidence(opmap, results, {TestKey.parse("test/test_sort.py::TestPlain::test_pin")})
    opmap.close()
    assert pin_only == {k: v for k, v in found.items() if k.name == "TestPlain::test_pin"} and len(pin_only) == 1
    pin = found.pop(TestKey.parse("test/test_sort.py::TestPlain::test_pin"))
    assert pin.gaps == {PIN: ("error", "register PrivateUse1HooksInterface")}  # not SORT: that ran on CPU
    assert pin.instances == (ProbedInstance(None, None, gaps=(PIN,)),)
    assert list(found) == [TestKey.parse("test/test_sort.py::TestSort::test_sort")]
    ev = found[TestKey.parse("test/test_sort.py::TestSort::test_sort")]
    assert ev.gaps == {SORT: ("missing_kernel", "Could not run")}
    assert (ev.works, ev.not_probed) == (1, 1)  # abs(int32) was never probed
    assert sorted(ev.instances, key=lambda i: i.dtype or "") == [
        ProbedInstance("float32", None), ProbedInstance("int32", None), ProbedInstance("int64", None, gaps=(SORT,))]
    found[TestKey.parse("test/test_sort.py::TestPlain::test_pin")] = pin
    path = write_probe_evidence(tmp_path / "probe_evidence.json", found)
    assert read_probe_evidence(path) == found


def test_a_call_not_replayed_lacks_the_kernel_another_replay_named(tmp_path: Path) -> None:
    # Upstream test_unary_ufuncs' test_frexp_assert_raises: its out= calls of the wrong dtype raise
    # on CPU, so no example of them is replayable; the functional call's replay names the out=
    # overload as the one with no kernel for the device, whatever the dtypes.
    functional, wrong_out = "aten::frexp.Tensor(float32)", "aten::frexp.Tensor_out(float32,int32,float32)"
    other = "aten::exp.out(float32,int32)"
    error = ("NotImplementedError: Could not run 'aten::frexp.Tensor_out' with arguments from the 'curatedev' "
             "backend. This could be because the operator doesn't exist for this backend")
    capture = tmp_path / "cap.jsonl"
    capture.write_text(OpRecord("test/test_unary_ufuncs.py::TestUnaryUfuncsCPU::test_frexp_assert_raises_cpu",
                                "TestUnaryUfuncs::test_frexp_assert_raises", "captured", device="cpu",
                                calls=(wrong_out, other), raised=(wrong_out,)).to_json() + "\n")
    opmap = OpMap(tmp_path / "state")
    opmap.ingest(capture)
    found = probe_evidence(opmap, {functional: ProbeResult(functional, "missing_kernel", error),
                                   wrong_out: ProbeResult(wrong_out, "not_probed", "no replayable example")})
    opmap.close()
    ev = found[TestKey.parse("test/test_unary_ufuncs.py::TestUnaryUfuncs::test_frexp_assert_raises")]
    assert ev.gaps == {wrong_out: ("missing_kernel", error)}
    assert (ev.works, ev.not_probed) == (0, 1)  # exp.out: no replay names it
    # It raised on CPU, as the test wants; on the device the dispatcher refuses the overload
    # itself before any check, with another message: the gap stands.
    assert ev.instances[0].gaps == (wrong_out,)


def test_an_instance_names_the_gaps_it_made_only_to_see_them_raise(tmp_path: Path) -> None:
    # Upstream test_indexing's test_setitem_expansion_error: index_put_ with a mismatched shape
    # raises on CPU, as the test wants; the bucket decides what that means on the device.
    call = "aten::index_put_(float32,bool,float32)"
    error = "NotImplementedError: Could not run 'aten::_index_put_impl_' with arguments from the 'curatedev' backend."
    capture = tmp_path / "cap.jsonl"
    capture.write_text(OpRecord("test/test_indexing.py::TestIndexingCPU::test_setitem_expansion_error_cpu",
                                "TestIndexing::test_setitem_expansion_error", "captured", device="cpu",
                                calls=(call, "aten::neg(float32)"), raised=(call,)).to_json() + "\n")
    opmap = OpMap(tmp_path / "state")
    opmap.ingest(capture)
    found = probe_evidence(opmap, {call: ProbeResult(call, "missing_kernel", error),
                                   "aten::neg(float32)": ProbeResult("aten::neg(float32)", "works", "")})
    opmap.close()
    [ev] = found.values()
    assert ev.instances == (ProbedInstance(None, None, None, (call,), (call,)),)
    assert ProbeEvidence.from_json(ev.to_json()) == ev


def _evidence(tmp_path: Path, records: tuple[OpRecord, ...],
              results: dict[str, ProbeResult]) -> dict[TestKey, ProbeEvidence]:
    """Probe evidence from capture records ingested into a fresh op map."""
    capture = tmp_path / "cap.jsonl"
    capture.write_text("".join(r.to_json() + "\n" for r in records))
    opmap = OpMap(tmp_path / "state")
    opmap.ingest(capture)
    try:
        return probe_evidence(opmap, results)
    finally:
        opmap.close()


def _missing(op: str) -> str:
    return f"NotImplementedError: Could not run '{op}' with arguments from the 'curatedev' backend."


def _instance(where: str, test: str, source: str, calls: tuple[str, ...] = (), **kind: str) -> OpRecord:
    """A float32 CPU instance of ``where`` (``file::Class``) ``test`` over an op or a module."""
    file, cls = where.split("::")
    return OpRecord(f"{file}::{cls}CPU::{test}_{next(iter(kind.values()))}_cpu_float32", f"{cls}::{test}", source,
                    device="cpu", dtype="float32", calls=calls, **kind)


def test_an_uncaptured_ops_instance_makes_the_missing_calls_of_its_op_elsewhere(tmp_path: Path) -> None:
    # Upstream test_unary_ufuncs: the budget captured _refs.exp2 in test_reference_numerics_normal,
    # where it calls aten::exp2.out (no kernel on the device), but not in test_contig_size1.
    exp2, where = "aten::exp2.out(float32,float32)", "test/test_unary_ufuncs.py::TestUnaryUfuncs"
    found = _evidence(tmp_path, (
        _instance(where, "test_reference_numerics_normal", "captured", (ADD, exp2), op="_refs.exp2"),
        _instance(where, "test_contig_size1", "captured", (ADD,), op="abs"),
        _instance(where, "test_contig_size1", "static", op="_refs.exp2"),  # left out by the budget
        _instance(where, "test_contig_size1", "static", op="neg"),  # no captured instance of neg anywhere
        _instance(where, "test_never_ran", "static", op="_refs.exp2"),  # no instance of the test was captured
    ), {exp2: ProbeResult(exp2, "missing_kernel", _missing("aten::exp2.out")), ADD: ProbeResult(ADD, "works")})
    contig = found[TestKey.parse(f"{where}::test_contig_size1")]
    assert contig.gaps == {exp2: ("missing_kernel", _missing("aten::exp2.out"))}
    assert sorted(contig.instances, key=lambda i: i.op or "") == [
        ProbedInstance("float32", "_refs.exp2", gaps=(exp2,)), ProbedInstance("float32", "abs")]
    assert TestKey.parse(f"{where}::test_never_ran") not in found


def test_an_uncaptured_modules_instance_makes_the_missing_calls_of_its_module_elsewhere(tmp_path: Path) -> None:
    # Holdout test_modules: nn.NLLLoss was captured in test_forward (nll_loss_forward.output, no
    # kernel on curatedev), not in test_errors, whose NLLLoss instance failed in the draft.
    nll, where = "aten::nll_loss_forward.output(float32,int64)", "test/test_modules.py::TestModule"
    found = _evidence(tmp_path, (
        _instance(where, "test_forward", "captured", (ADD, nll), module="nn.NLLLoss"),
        _instance(where, "test_repr", "captured", (ADD,), module="nn.NLLLoss"),  # prints it: runs nothing of it
        _instance(where, "test_errors", "captured", (ADD,), module="nn.ReLU"),
        _instance(where, "test_errors", "static", module="nn.NLLLoss"),  # left out by the budget
    ), {nll: ProbeResult(nll, "missing_kernel", _missing("aten::nll_loss_forward.output")),
        ADD: ProbeResult(ADD, "works")})
    errors = found[TestKey.parse("test/test_modules.py::TestModule::test_errors")]
    assert sorted(errors.instances, key=lambda i: i.module or "") == [
        ProbedInstance("float32", None, "nn.NLLLoss", (nll,)), ProbedInstance("float32", None, "nn.ReLU")]


def test_a_modules_forward_that_fails_on_the_device_is_its_gap_in_every_test_that_runs_it(tmp_path: Path) -> None:
    # Holdout test_modules on OpenReg: GRUCell's forward takes _thnn_fused_gru_cell there, which
    # no CPU call shows; the module call carries it to test_grad's uncaptured instance.
    gru, where = "module::nn.GRUCell(float32)", "test/test_modules.py::TestModule"
    error = _missing("aten::_thnn_fused_gru_cell").replace("'curatedev' backend", "'CPU' backend")
    found = _evidence(tmp_path, (
        _instance(where, "test_forward", "captured", (ADD, gru), module="nn.GRUCell"),
        _instance(where, "test_grad", "captured", (ADD,), module="nn.ReLU"),
        _instance(where, "test_grad", "static", module="nn.GRUCell"),  # left out by the budget
    ), {gru: ProbeResult(gru, "missing_kernel", error), ADD: ProbeResult(ADD, "works")})
    grad = found[TestKey.parse(f"{where}::test_grad")]
    assert grad.gaps == {gru: ("missing_kernel", error)}
    assert ProbedInstance("float32", None, "nn.GRUCell", (gru,)) in grad.instances


def test_a_conversion_ops_dtype_gap_is_the_ops_whatever_the_instances_dtype(tmp_path: Path) -> None:
    # Upstream test_unary_ufuncs' ``byte`` OpInfo compares its uint8 result in every input dtype:
    # eq.Tensor(uint8,uint8), which curatedev lacks, is the op's, not the float32 instance's.
    eq_u8, eq_f32 = "aten::eq.Tensor(uint8,uint8)", "aten::eq.Tensor(float16,float16)"
    path = "test/test_unary_ufuncs.py::TestUnaryUfuncsCPU::"

    def rec(test: str, op: str, dtype: str, source: str, calls: tuple[str, ...] = ()) -> OpRecord:
        return OpRecord(f"{path}{test}_{op}_cpu_{dtype}", f"TestUnaryUfuncs::{test}", source, device="cpu",
                        dtype=dtype, op=op, calls=calls)

    capture = tmp_path / "cap.jsonl"
    capture.write_text("".join(r.to_json() + "\n" for r in (
        rec("test_reference_numerics_normal", "byte", "float32", "captured", (eq_u8,)),
        # an ordinary op whose float16 instance lacks eq in float16: its own dtype, not the op's
        rec("test_reference_numerics_normal", "abs", "float16", "captured", (eq_f32,)),
        rec("test_contig_size1", "neg", "float32", "captured", (ADD,)),
        rec("test_contig_size1", "byte", "bfloat16", "static"),
        rec("test_contig_size1", "abs", "float32", "static"))))
    opmap = OpMap(tmp_path / "state")
    opmap.ingest(capture)
    found = probe_evidence(opmap, {eq_u8: ProbeResult(eq_u8, "unsupported_dtype", "not implemented for 'Byte'"),
                                   eq_f32: ProbeResult(eq_f32, "unsupported_dtype", "not implemented for 'Half'"),
                                   ADD: ProbeResult(ADD, "works")})
    opmap.close()
    contig = found[TestKey.parse("test/test_unary_ufuncs.py::TestUnaryUfuncs::test_contig_size1")]
    assert sorted(contig.instances, key=lambda i: i.op or "") == [
        ProbedInstance("bfloat16", "byte", gaps=(eq_u8,)), ProbedInstance("float32", "neg")]


CONJ, REDUCTIONS = "aten::_conj(complex64)", "test/test_reductions.py::TestReductionsCPU::"


def _masked_std(test: str, dtype: str, source: str, calls: tuple[str, ...] = ()) -> OpRecord:
    return OpRecord(f"{REDUCTIONS}{test}_masked_std_cpu_{dtype}", f"TestReductions::{test}", source, device="cpu",
                    dtype=dtype, op="masked.std", calls=calls)


# Upstream test_reductions on OpenReg: masked.std calls aten::_conj in complex64 only, which
# kills the process; test_reference_masked captured it in complex64, test_noncontiguous_all
# only in float32 (its complex64 instance was over the budget) and crashed in the draft.
INHERITED = {
    "every captured instance of its op at its dtype makes the call": (
        (_masked_std("test_reference_masked", "complex64", "captured", (ADD, CONJ)),
         _masked_std("test_reference_masked", "float32", "captured", (ADD,)),
         _masked_std("test_noncontiguous_all", "complex64", "static"),  # left out by the budget
         _masked_std("test_noncontiguous_all", "float64", "static")),  # a dtype no test captured it in
        {CONJ: ("crash", "the process died (signal SIGSEGV)")},
        [ProbedInstance("complex64", "masked.std", gaps=(CONJ,)), ProbedInstance("float32", "masked.std")]),
    "a captured instance at that dtype does not make it": (
        (_masked_std("test_reference_masked", "complex64", "captured", (ADD, CONJ)),
         _masked_std("test_ref_small_input", "complex64", "captured", (ADD,)),  # reaches no conj: the op need not
         _masked_std("test_noncontiguous_all", "complex64", "static")),
        {}, [ProbedInstance("float32", "masked.std")]),
}


@pytest.mark.parametrize("records, gaps, instances", INHERITED.values(), ids=INHERITED.keys())
def test_an_uncaptured_instance_makes_the_failing_calls_every_captured_one_of_its_op_at_its_dtype_makes(
        tmp_path: Path, records: tuple[OpRecord, ...], gaps: dict[str, tuple[str, str]],
        instances: list[ProbedInstance]) -> None:
    found = _evidence(tmp_path, (*records, _masked_std("test_noncontiguous_all", "float32", "captured", (ADD,))),
                      {CONJ: ProbeResult(CONJ, "crash", "the process died (signal SIGSEGV)"), ADD: ProbeResult(ADD, "works")})
    noncontig = found[TestKey.parse("test/test_reductions.py::TestReductions::test_noncontiguous_all")]
    assert noncontig.gaps == gaps
    assert sorted(noncontig.instances, key=lambda i: i.dtype or "") == instances


def test_the_draft_isolates_the_dtypes_of_the_calls_that_killed_the_probe() -> None:
    def ev(*gaps: tuple[str, str, str]) -> ProbeEvidence:
        return ProbeEvidence(gaps={call: (status, error) for call, status, error in gaps})

    evidence = {
        TestKey.parse("test_ops_gradients.py::TestBwdGradients::test_fn_grad"): ev(
            ("aten::_conj(complex128)", "crash", "the process died (signal SIGSEGV)"),
            ("aten::_neg_view(float64)", "crash", "the process died (signal SIGSEGV)"),
            ("aten::add.Tensor(float16,float16)", "missing_kernel", "Could not run")),
        TestKey.parse("test_x.py::TestX::test_hang"): ev(("aten::mm(bfloat16,bfloat16)", "crash", "hang: no result after 60s")),
        TestKey.parse("test_x.py::TestX::test_ok"): ev(),
    }
    # a hang is not isolated (the bucket skips the test); a missing kernel fails, it kills nothing
    assert crash_dtypes(evidence) == {"complex128", "float64"}
    assert crash_dtypes({}) == frozenset()


@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("float64", "float32")])
def test_an_instance_of_a_dtype_the_device_lacks_does_not_clear_its_ops_gap(
        tmp_path: Path, dtypes: tuple[str, str]) -> None:
    # Corpus test_unary_ufuncs: ``double``'s captured float32 instance compares its float64 result
    # (eq.Tensor(float64,float64), which curatedev lacks); its captured float64 instance makes the
    # same call in its own dtype. That one says nothing about the op (the profile skips it), so
    # test_contig_size1's uncaptured float32 instance of ``double`` still reaches the gap.
    eq_f64 = "aten::eq.Tensor(float64,float64)"
    path = "test/test_unary_ufuncs.py::TestUnaryUfuncsCPU::"

    def rec(test: str, dtype: str, source: str, calls: tuple[str, ...] = (), op: str = "double") -> OpRecord:
        return OpRecord(f"{path}{test}_{op}_cpu_{dtype}", f"TestUnaryUfuncs::{test}", source, device="cpu",
                        dtype=dtype, op=op, calls=calls)

    found = _evidence(tmp_path, (
        *(rec("test_batch_vs_slicing", dtype, "captured", (ADD, eq_f64)) for dtype in dtypes),
        rec("test_contig_size1", "float32", "captured", (ADD,), op="neg"),
        rec("test_contig_size1", "float32", "static")), {
        eq_f64: ProbeResult(eq_f64, "unsupported_dtype", "not implemented for 'Double'"),
        ADD: ProbeResult(ADD, "works")})
    contig = found[TestKey.parse("test/test_unary_ufuncs.py::TestUnaryUfuncs::test_contig_size1")]
    assert sorted(contig.instances, key=lambda i: i.op or "") == [
        ProbedInstance("float32", "double", gaps=(eq_f64,)), ProbedInstance("float32", "neg")]


def test_a_call_made_to_see_it_raise_is_judged_by_its_raising_twin(tmp_path: Path) -> None:
    # Upstream test_polygamma_neg expects polygamma's own message for n < 0: the probe replayed the
    # raising inputs and curatedev raised the same error before its missing kernel. index_select's
    # bound check is in the kernel curatedev lacks. A twin the probe did not replay leaves the call.
    poly, isel, neg = "aten::polygamma(float32)", "aten::index_select(float32,int64)", "aten::neg(float32)"
    path = "test/test_unary_ufuncs.py::TestUnaryUfuncsCPU::"

    def rec(test: str, call: str) -> OpRecord:
        return OpRecord(f"{path}{test}_cpu", f"TestUnaryUfuncs::{test}", "captured", device="cpu",
                        calls=(ADD, call, raise_call(call, "RuntimeError")), raised=(call, raise_call(call, "RuntimeError")))

    found = _evidence(tmp_path, (rec("test_polygamma_neg", poly), rec("test_index_error", isel),
                                 rec("test_neg_error", neg)), {
        poly: ProbeResult(poly, "missing_kernel", _missing("aten::polygamma.out")),
        raise_call(poly, "RuntimeError"): ProbeResult(raise_call(poly, "RuntimeError"), "works"),
        isel: ProbeResult(isel, "missing_kernel", _missing("aten::index_select")),
        raise_call(isel, "RuntimeError"): ProbeResult(raise_call(isel, "RuntimeError"), "missing_kernel", _missing("aten::index_select")),
        neg: ProbeResult(neg, "missing_kernel", _missing("aten::neg.out")),
        raise_call(neg, "RuntimeError"): ProbeResult(raise_call(neg, "RuntimeError"), "not_probed", "CPU replay did not raise"),
        ADD: ProbeResult(ADD, "works")})

    def instance(test: str) -> ProbedInstance:
        [inst] = found[TestKey.parse(f"test/test_unary_ufuncs.py::TestUnaryUfuncs::{test}")].instances
        return inst

    assert instance("test_polygamma_neg") == ProbedInstance(None, None, None)
    assert instance("test_index_error") == ProbedInstance(None, None, None, (raise_call(isel, "RuntimeError"),), (raise_call(isel, "RuntimeError"),))
    assert instance("test_neg_error") == ProbedInstance(None, None, None, (neg,), (neg,))


def test_a_view_that_is_a_copy_on_the_device_is_a_gap_only_where_the_test_wrote_into_it(tmp_path: Path) -> None:
    # OpenReg's unfold returns a copy: upstream test_unfold_view writes into the view and reads
    # the base back ("Expected 0.0 but got 1.0"); a test that only reads the view passes.
    unfold = "aten::unfold(float32)"
    path = "test/test_view_ops.py::TestViewOpsCPU::"

    def rec(test: str, calls: tuple[str, ...]) -> OpRecord:
        return OpRecord(f"{path}{test}_cpu", f"TestViewOps::{test}", "captured", device="cpu", calls=calls)

    found = _evidence(tmp_path, (rec("test_unfold_view", (ADD, unfold, write_call(unfold))),
                                 rec("test_unfold_reads", (ADD, unfold))), {
        unfold: ProbeResult(unfold, "works"), ADD: ProbeResult(ADD, "works"),
        write_call(unfold): ProbeResult(write_call(unfold), "wrong_result", "on CPU its result is a view of its input")})

    def evidence(test: str) -> ProbeEvidence:
        return found[TestKey.parse(f"test/test_view_ops.py::TestViewOps::{test}")]

    assert evidence("test_unfold_view").instances == (ProbedInstance(None, None, None, (write_call(unfold),)),)
    assert evidence("test_unfold_view").gaps[write_call(unfold)][0] == "wrong_result"
    assert evidence("test_unfold_reads").instances == (ProbedInstance(None, None, None),)
    assert evidence("test_unfold_reads").works == 2
