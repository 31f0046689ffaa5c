from __future__ import annotations

from pathlib import Path

import pytest

from testcurator.agents import rails
from testcurator.agents.brain import BackendContext, BucketRequest, ExecutionRecord, RefineRequest, ScopeRequest
from testcurator.agents.decision import Decision, FileDecision

BACKEND = BackendContext(name="dev", device="dev", supported_dtypes=frozenset({"float32", "bfloat16"}),
                         unsupported_ops=frozenset({"aten::_scaled_mm", "rsub"}))
KNOWN = frozenset({"TestA::test_plain", "TestA::test_ops", "TestA::test_dtypes", "TestA::test_other"})
REQUESTS = {
    "TestA::test_plain": BucketRequest("TestA::test_plain", "test_a.py", "h1", aten_ops=("aten::add.Tensor",)),
    "TestA::test_ops": BucketRequest("TestA::test_ops", "test_a.py", "h2", ops=("_scaled_mm",), aten_ops=("aten::_scaled_mm",)),
    "TestA::test_dtypes": BucketRequest("TestA::test_dtypes", "test_a.py", "h3", dtypes=("float64", "complex64", "float32")),
}


def dec(test: str, mode: str = "mandatory_success", **kw: object) -> Decision:
    return Decision(test=test, mode=mode, reason="r", evidence=(), brain="t", prompt_hash=None, **kw)  # type: ignore[arg-type]


def rules(decisions: list[Decision], requests: list[BucketRequest | RefineRequest]) -> set[tuple[str, str]]:
    return {(v.subject, v.rule) for v in rails.check_bucket(decisions, requests, KNOWN, BACKEND)}


@pytest.mark.parametrize(("decision", "expected"), [
    (dec("TestA::test_plain"), set()),
    (dec("TestA::test_ops"), {("TestA::test_ops", rails.UNSUPPORTED_MANDATORY)}),
    (dec("TestA::test_ops", "xfail_strict"), set()),
    (dec("TestA::test_dtypes"), set()),  # float32 is left to run
    (dec("TestA::test_dtypes", exclude_dtypes=("float32",)), {("TestA::test_dtypes", rails.UNSUPPORTED_MANDATORY)}),
    (dec("TestA::test_plain", "maybe"), {("TestA::test_plain", rails.BAD_MODE)}),
])
def test_single_decision_rails(decision: Decision, expected: set[tuple[str, str]]) -> None:
    assert rules([decision], [REQUESTS[decision.test]]) == expected


def test_unknown_extra_duplicate_and_missing() -> None:
    requests = [REQUESTS["TestA::test_plain"], REQUESTS["TestA::test_dtypes"]]
    decisions = [dec("TestA::test_plain"), dec("TestA::test_plain"), dec("TestNope::test_x"), dec("TestA::test_other")]
    assert rules(decisions, requests) == {
        ("TestA::test_plain", rails.DUPLICATE), ("TestA::test_dtypes", rails.MISSING),
        ("TestNope::test_x", rails.UNKNOWN_TEST), ("TestA::test_other", rails.NOT_REQUESTED)}


def test_aten_overload_matches_unsupported_base_name() -> None:
    request = BucketRequest("TestA::test_plain", "test_a.py", "h", aten_ops=("aten::rsub.Scalar",))
    assert rules([dec("TestA::test_plain")], [request]) == {("TestA::test_plain", rails.UNSUPPORTED_MANDATORY)}


def refine(*records: ExecutionRecord) -> RefineRequest:
    return RefineRequest(REQUESTS["TestA::test_dtypes"], previous=None, executions=records)


FAIL_F32 = ExecutionRecord("test_dtypes_dev_float32", ("failed", "failed"), dtype="float32", failure_class="numerical_mismatch")
PASS_F32 = ExecutionRecord("test_dtypes_dev_float32", ("passed", "passed"), dtype="float32")
PASS_BF16 = ExecutionRecord("test_dtypes_dev_bfloat16", ("passed",), dtype="bfloat16")
FLAKY = ExecutionRecord("test_dtypes_dev_float32", ("failed", "passed"), dtype="float32")
INFRA = ExecutionRecord("test_dtypes_dev_float32", ("error",), dtype="float32", failure_class="infrastructure")
CRASHED = ExecutionRecord("test_dtypes_dev_float32", ("crashed", "crashed"), dtype="float32", failure_class="crash")
TIMEOUT = ExecutionRecord("test_dtypes_dev_float32", ("timeout",), dtype="float32", failure_class="timeout")
FAIL_PAIR = ExecutionRecord("test_dtypes_dev_float64_float32", ("failed",), dtype="float64_float32",
                            failure_class="unsupported_dtype")


@pytest.mark.parametrize(("mode", "records", "exclude", "violates"), [
    ("mandatory_success", (FAIL_F32,), (), True),
    ("mandatory_success", (FAIL_F32, PASS_BF16), ("float32",), False),
    ("mandatory_success", (FLAKY,), (), False),
    # issue 9: a variant that crashed or hung on every attempt is no success either
    ("mandatory_success", (CRASHED, PASS_BF16), (), True),
    ("mandatory_success", (TIMEOUT,), (), True),
    # excluding one member of a dtype pair removes the pair's variants
    ("mandatory_success", (FAIL_PAIR, PASS_BF16), ("float64",), False),
    ("mandatory_success", (FAIL_PAIR, PASS_BF16), ("bfloat16",), True),
    ("mandatory_success", (INFRA,), (), False),
    ("xfail_strict", (PASS_F32, PASS_BF16), (), True),
    ("xfail_strict", (PASS_F32, FAIL_F32), (), False),
    ("xfail", (PASS_F32,), (), False),
    ("xfail_strict", (), (), False),
])
def test_execution_evidence(mode: str, records: tuple[ExecutionRecord, ...], exclude: tuple[str, ...], violates: bool) -> None:
    found = rules([dec("TestA::test_dtypes", mode, exclude_dtypes=exclude)], [refine(*records)])
    assert (("TestA::test_dtypes", rails.CONTRADICTS_EXECUTION) in found) is violates


def fdec(path: str) -> FileDecision:
    return FileDecision(path=path, keep=True, reason="r", evidence=(), brain="t", prompt_hash=None)


@pytest.mark.parametrize(("path", "rule"), [
    ("test_ops.py", None),
    ("../secrets.txt", rails.PATH_OUTSIDE_TREE),
    ("/etc/passwd", rails.PATH_OUTSIDE_TREE),
    ("inductor/../../x.py", rails.PATH_OUTSIDE_TREE),
    ("test_other.py", rails.UNKNOWN_PATH),
])
def test_scope_paths(tmp_path: Path, path: str, rule: str | None) -> None:
    requests = [ScopeRequest("test_ops.py", "file")]
    found = {(v.subject, v.rule) for v in rails.check_scope([fdec(path)], requests, tmp_path)}
    if rule is None:
        assert found == set()
    else:
        assert (path, rule) in found and ("test_ops.py", rails.MISSING) in found


def test_symlink_escaping_the_tree_is_outside(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "link").symlink_to(tmp_path)
    violations = rails.check_scope([fdec("link/x.py")], [ScopeRequest("link/x.py", "file")], tree)
    assert [v.rule for v in violations] == [rails.PATH_OUTSIDE_TREE]


@pytest.mark.parametrize("reason, ok", [
    (":{", False), ("1", False), ("}, ", False), ("evis evis", False),
    ("It calls aten::add on float32, which works.", True), ("keeps eager ops", False), ("unsupported_dtype (float64)", False),
    ("It only calls aten::_local_scalar_dense", False), ("it keeps the eager ops", True),
])
def test_a_reasoning_must_say_something_a_reviewer_can_read(reason: str, ok: bool) -> None:
    from testcurator.agents.rails import NO_REASON, check_reasons

    found = check_reasons([("TestA::test_one", reason)])
    assert (found == []) is ok and all(v.rule == NO_REASON for v in found)


def test_the_model_may_keep_more_than_the_rules_never_less() -> None:
    from testcurator.agents.decision import FileDecision
    from testcurator.agents.rails import UNSUPPORTED_DROP, check_drops

    def fd(path: str, keep: bool) -> FileDecision:
        return FileDecision(path=path, keep=keep, reason="the model says so here", evidence=(), brain="llm", prompt_hash=None)

    kept_by_rules = {"test/test_ops.py": "Kept: it holds device-generic tests"}
    found = check_drops([fd("test/test_ops.py", False), fd("test/distributed", False), fd("test/onnx", True)], kept_by_rules)
    assert [(v.subject, v.rule) for v in found] == [("test/test_ops.py", UNSUPPORTED_DROP)]
    assert "device-generic" in found[0].message



@pytest.mark.parametrize("reason, ok", [
    ("It only calls aten::add.Tensor, which the probe found working.", False),   # the prompt's example, copied
    ("It calls aten::mul.Tensor on float32, which works.", True),
    ("aten::mul works at every dtype it uses.", True),                              # the base name covers overloads
    ("No op is named here, only words.", True),
])
def test_a_reasoning_may_name_only_ops_the_test_called(reason: str, ok: bool) -> None:
    from testcurator.agents.brain import BucketRequest
    from testcurator.agents.decision import Decision
    from testcurator.agents.rails import UNFOUNDED_CLAIM, check_claims

    request = BucketRequest("TestA::test_mul", "test_a.py", "h", aten_ops=("aten::mul.Tensor", "aten::ones"))
    decision = Decision(test="TestA::test_mul", mode="mandatory_success", reason=reason, evidence=(), brain="llm",
                        prompt_hash=None)
    found = check_claims([decision], [request])
    assert (found == []) is ok and all(v.rule == UNFOUNDED_CLAIM and "aten::add.Tensor" in v.message for v in found)


def test_an_op_the_probe_error_names_is_founded() -> None:
    from testcurator.agents.brain import BucketRequest
    from testcurator.agents.decision import Decision
    from testcurator.agents.rails import check_claims
    from testcurator.memory.capability import ProbeEvidence

    error = "NotImplementedError: Could not run 'aten::native_batch_norm' with arguments from the 'dev' backend."
    probe = ProbeEvidence(gaps={"aten::native_layer_norm(float32)": ("missing_kernel", error)})
    request = BucketRequest("TestA::test_norm", "test_a.py", "h", aten_ops=("aten::native_layer_norm",), probe=probe)

    def claims(reason: str) -> list[str]:
        decision = Decision(test="TestA::test_norm", mode="xfail_strict", reason=reason, evidence=(), brain="llm", prompt_hash=None)
        return [v.message for v in check_claims([decision], [request])]

    assert claims("The device lacks aten::native_batch_norm, which layer norm runs on.") == []
    assert claims("The device lacks aten::batch_norm_stats here.") != []


@pytest.mark.parametrize("reason, rule", [
    ("Every float64 instance makes a call the probe found unsupported for that dtype.", "copied_reason"),
    ('"every FLOAT64 instance makes a call the probe found unsupported for that dtype"', "copied_reason"),
    ("Every float64 instance makes a call.", None),  # too short to call a copy: plain words do repeat
    ("Its float64 instances call aten::abs, which the probe found unsupported.", None),
])
def test_a_reasoning_copied_from_the_prompt_is_not_the_models_own(reason: str, rule: str | None) -> None:
    from testcurator.agents.rails import check_reasons

    prompt = 'The reasoning reads like this: "Every float64 instance makes a call the probe found\nunsupported for that dtype, and so on."'
    assert [v.rule for v in check_reasons([("TestA::test_one", reason)], prompt)] == ([rule] if rule else [])


@pytest.mark.parametrize("reason, expected", [
    ("Skip: @onlyCPU restricts it to cpu.", "Skip: @onlyCPU restricts it to cpu. (not the LLM's decision: endpoint down: not asked)"),
    # A refine fallback keeps its bucket decision's reason, note and all: one note, the latest.
    ("Skip: @onlyCPU restricts it to cpu. (not the LLM's decision: invalid answer after 1 tries: ValueError)",
     "Skip: @onlyCPU restricts it to cpu. (not the LLM's decision: endpoint down: not asked)"),
])
def test_a_fallback_reason_carries_one_note(reason: str, expected: str) -> None:
    from testcurator.agents.decision import fallback_reason

    assert fallback_reason(reason, "endpoint down: not asked") == expected


@pytest.mark.parametrize(("ops", "bad"), [
    (("add",), False), (("add@complex64",), False),
    (("add@float64",), True),  # not a dtype the test runs: validate --level 2 rejects an edit that never applies
    (("sub@float32",), True),
])
def test_an_op_excluded_at_a_dtype_names_the_tests_own_op_and_dtype(ops: tuple[str, ...], bad: bool) -> None:
    request = BucketRequest("TestA::test_ops", "test_a.py", "h2", ops=("add", "mul"), dtypes=("float32", "complex64"))
    found = rails.check_edits([dec("TestA::test_ops", exclude_ops=ops)], [request])
    assert [v.rule for v in found] == ([rails.BAD_EDIT] if bad else [])


@pytest.mark.parametrize(("ops", "bad"), [
    (("div_floor_rounding",), False),  # a variant the test's records ran, as its instances name it
    (("div_floor_rounding@float32",), False),
    (("div_trunc_rounding",), True),  # a variant no record of this test names
])
def test_a_refine_exclusion_may_name_one_variant_its_records_ran(ops: tuple[str, ...], bad: bool) -> None:
    base = BucketRequest("TestA::test_ops", "test_a.py", "h3", ops=("div",), dtypes=("float32",))
    records = (ExecutionRecord("test_ops_div_floor_rounding_dev_float32", ("failed",), dtype="float32", op="div",
                               op_variant="floor_rounding"),
               ExecutionRecord("test_ops_div_no_rounding_mode_dev_float32", ("passed",), dtype="float32", op="div"))
    found = rails.check_edits([dec("TestA::test_ops", exclude_ops=ops)], [RefineRequest(base, None, records)])
    assert [v.rule for v in found] == ([rails.BAD_EDIT] if bad else [])
    # a bucket decision has no records: a variant name is not the test's op there
    assert [v.rule for v in rails.check_edits([dec("TestA::test_ops", exclude_ops=ops)], [base])] == [rails.BAD_EDIT]
