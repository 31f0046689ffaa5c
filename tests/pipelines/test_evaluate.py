"""The measured brain: predictions judged against execution (pipelines/evaluate.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from testcurator.agents.brain import ExecutionRecord
from testcurator.agents.decision import Decision
from testcurator.vocab import TestKey
from testcurator.pipelines.evaluate import SOURCES, Prediction, evaluate, judge, markdown, unrun

PASS = ExecutionRecord("v_float32", ("passed",), dtype="float32")
FAIL_F16 = ExecutionRecord("v_float16", ("failed", "failed"), dtype="float16", failure_class="dtype_unsupported")
FLAKY = ExecutionRecord("v_bf16", ("failed", "passed"), dtype="bfloat16")
SKIPPED = ExecutionRecord("v_int8", ("skipped",), dtype="int8")
INFRA = ExecutionRecord("v_x", ("failed",), failure_class="infrastructure")
# upstream's own @decorateIf(unittest.expectedFailure, ...) on one subtest: pytest's xfailed
UPSTREAM_XFAIL = ExecutionRecord("v_x_2", ("xfailed",))


@pytest.mark.parametrize(("mode", "variants", "verdict"), [
    ("mandatory_success", [PASS], "held"),
    ("mandatory_success", [PASS, FAIL_F16], "wasted"),
    ("skip", [PASS], "lost_coverage"),
    ("skip", [FAIL_F16], "held"),
    ("xfail_strict", [FAIL_F16], "held"),
    ("xfail", [PASS], "passes_anyway"),
    ("mandatory_success", [PASS, FLAKY], "flaky"),
    ("skip", [], "not_run"),
    ("skip", [SKIPPED], "not_run"),
    ("mandatory_success", [INFRA], "not_run"),
    ("mandatory_success", [PASS, UPSTREAM_XFAIL], "held"),
    ("xfail", [UPSTREAM_XFAIL], "held"),
])
def test_verdicts(mode: str, variants: list[ExecutionRecord], verdict: str) -> None:
    assert judge(Prediction(mode), variants) == verdict


def test_exclusions_are_applied_before_judging() -> None:
    assert judge(Prediction("mandatory_success", exclude_dtypes=("float16",)), [PASS, FAIL_F16]) == "held"
    assert judge(Prediction("mandatory_success", exclude_ops=("add",)), [
        ExecutionRecord("v_add", ("failed",), op="add"), PASS]) == "held"
    empty = ExecutionRecord("v_0", ("failed", "failed"), params=(("shape", "(0,)"),))
    assert judge(Prediction("mandatory_success", exclude_params=("shape=0",)), [PASS, empty]) == "held"
    assert judge(Prediction("mandatory_success", exclude_params=("shape=2x3",)), [PASS, empty]) == "wasted"


K = TestKey.parse


def test_table_counts_per_mode_and_renders_side_by_side() -> None:
    truth = {K("f::A::a"): [PASS], K("f::A::b"): [FAIL_F16], K("f::A::c"): [PASS]}
    good = evaluate({K("f::A::a"): Prediction("mandatory_success"), K("f::A::b"): Prediction("xfail_strict"),
                     K("f::A::c"): Prediction("mandatory_success")}, truth)
    bad = evaluate({K("f::A::a"): Prediction("skip"), K("f::A::b"): Prediction("mandatory_success"),
                    K("f::A::c"): Prediction("skip"), K("f::A::d"): Prediction("skip")}, truth)
    assert good["total"]["held"] == 3 and good["held_share"] == 1.0
    assert bad["per_mode"]["skip"] == {"held": 0, "lost_coverage": 2, "wasted": 0, "passes_anyway": 0, "flaky": 0,
                                       "not_run": 1, "by_preference": 0, "decided": 3}
    assert bad["per_mode"]["mandatory_success"]["wasted"] == 1 and bad["held_share"] == 0.0
    lines = markdown({"sources": {"offline": good, "llm": bad}, "tests_observed": 3})
    assert lines[0].startswith("| predicted mode | offline: decided") and "llm: decided" in lines[0]
    assert "| skip | 0 / 0 / 0 / 0 / 0 / 0 | 3 / 0 / 2 / 0 / 1 / 0 |" in lines
    assert any(line.startswith("- llm: 2 skip(s) that pass on the device (lost coverage), 1 mandatory_success") for line in lines)
    # Every wrong prediction is named (issue 22: "1 skip(s) that pass" said nothing about which).
    assert bad["wrong"] == {"lost_coverage": ["f::A::a", "f::A::c"], "wasted": ["f::A::b"], "passes_anyway": []}
    assert "  - lost_coverage: `f::A::c`" in lines and "  - wasted: `f::A::b`" in lines
    assert unrun(truth, {K("f::A::a"): Prediction("skip"), K("f::A::d"): Prediction("skip")}) == [K("f::A::d")]


def test_a_skip_the_preferences_asked_for_is_not_judged_but_named_when_it_passes() -> None:
    """The profile said "no sparse": a sparse test's skip is the user's scope, not a
    prediction that the device fails it; eval does not count it either way, and says which
    of them pass on the device."""
    wish = Decision(test="A::a", mode="skip", reason="Skip: it needs sparse, which the preference `no sparse` excludes.",
                    evidence=("source: `x.to_sparse()`", "preference `no sparse`"), brain="offline", prompt_hash="h")
    guess = Decision(test="A::b", mode="skip", reason="Skip: no reason.", evidence=("source: `x`",), brain="offline",
                     prompt_hash="h")
    assert Prediction.of(wish).by_preference and not Prediction.of(guess).by_preference
    truth = {K("f::A::a"): [PASS], K("f::A::b"): [PASS], K("f::A::c"): [FAIL_F16]}
    result = evaluate({K("f::A::a"): Prediction.of(wish), K("f::A::b"): Prediction.of(guess),
                       K("f::A::c"): Prediction.of(replace(wish, test="A::c"))}, truth)
    assert result["per_mode"]["skip"]["by_preference"] == 2 and result["per_mode"]["skip"]["lost_coverage"] == 1
    assert result["judged"] == 1 and result["by_preference_passing"] == ["f::A::a"]
    lines = markdown({"sources": {"stored": result}, "tests_observed": 3})
    assert "- stored: 2 skip(s) the profile's preferences asked for, not judged; 1 of them pass on the device" in lines
    assert "  - by_preference, passes: `f::A::a`" in lines


def test_an_exclusion_no_variant_tested_is_run_and_one_that_passes_is_named() -> None:
    """The probe excluded float16 before the draft (so the draft ran none of it); the
    exclusion is a prediction too: ``--run-unrun`` runs it, and excluded variants that all
    pass are coverage lost by exclusion (OpenReg: a sparse=True example's gap stood for
    embedding_bag's dense float16 backward)."""
    excluding = Prediction("mandatory_success", exclude_dtypes=("float16",))
    skipped_f16 = ExecutionRecord("v_float16", ("skipped",), dtype="float16")
    passed_f16 = ExecutionRecord("v_float16", ("passed",), dtype="float16")
    predictions = {K("f::A::a"): excluding, K("f::A::b"): Prediction("mandatory_success"),
                   K("f::A::c"): replace(excluding, mode="skip")}
    draft = {K("f::A::a"): [PASS, skipped_f16], K("f::A::b"): [PASS], K("f::A::c"): [PASS]}
    assert unrun(draft, predictions) == [K("f::A::a")]
    assert evaluate(predictions, draft)["excluded_passing"] == []
    for f16, named in ((passed_f16, ["f::A::a"]), (FAIL_F16, [])):
        result = evaluate(predictions, {**draft, K("f::A::a"): [PASS, skipped_f16, PASS, f16]})
        assert result["excluded_passing"] == named and result["per_mode"]["mandatory_success"]["held"] == 2
        assert unrun({**draft, K("f::A::a"): [PASS, f16]}, predictions) == []
        lines = markdown({"sources": {"stored": result}, "tests_observed": 3})
        assert f"- stored: {len(named)} test(s) whose excluded variants (dtypes, ops, modules, params) all pass on the " \
               "device (coverage lost by exclusion)" in lines
        assert ("  - excluded, passes: `f::A::a`" in lines) == bool(named)


def test_a_variant_an_earlier_extra_execution_could_only_skip_is_not_run_again() -> None:
    """float64, which the profile does not support, is excluded: the first ``--run-unrun``
    runs the test and the profile skips that variant again; a second one would only repeat it."""
    excluding = Prediction("mandatory_success", exclude_dtypes=("float64",))
    f64 = ExecutionRecord("v_float64", ("skipped",), dtype="float64")
    never = ExecutionRecord("v_never", ("skipped",))
    predictions = {K("f::A::a"): excluding, K("f::A::b"): Prediction("skip")}
    truth = {K("f::A::a"): [PASS, f64], K("f::A::b"): [never]}
    assert unrun(truth, predictions) == [K("f::A::a"), K("f::A::b")]
    assert unrun(truth, predictions, tried={"v_float64"}) == [K("f::A::b")]
    assert unrun(truth, predictions, tried={"v_float64", "v_never"}) == []
    assert unrun(truth, predictions, tried={PASS.variant}) == [K("f::A::a"), K("f::A::b")]  # not the excluded one
    # A test no device instance exists of (deviceCountAtLeast(2)): settled once its file was collected.
    absent = {K("f::A::c"): Prediction("mandatory_success"), K("g::A::d"): Prediction("mandatory_success")}
    assert unrun({}, absent) == [K("f::A::c"), K("g::A::d")]
    assert unrun({}, absent, tried={"f::A::other_float32"}) == [K("g::A::d")]


def test_a_second_run_unrun_keeps_what_the_first_settled() -> None:
    # The execution collects whole files: a test it was not asked to run comes back skipped,
    # and must not hide the earlier eval's result for it.
    from testcurator.pipelines.evaluate import _merged
    from testcurator.runner.results.records import TestRecord as R

    earlier = [R("f::a", "passed"), R("f::b", "failed"), R("f::c", "skipped"), R("f::d", "passed")]
    now = [R("f::a", "skipped"), R("f::b", "passed"), R("f::c", "skipped"), R("f::e", "failed")]
    assert sorted((r.nodeid, r.outcome) for r in _merged(earlier, now)) == [
        ("f::a", "passed"), ("f::b", "passed"), ("f::c", "skipped"), ("f::d", "passed"), ("f::e", "failed")]


def test_sources_are_an_explicit_registry() -> None:
    assert set(SOURCES) == {"stored", "offline", "llm"}
    assert SOURCES["offline"]().name == "offline"
