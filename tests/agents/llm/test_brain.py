from __future__ import annotations

from collections.abc import Sequence
import json
from dataclasses import replace
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, Reply, Status, answer, slow

from testcurator.agents import registry
from testcurator.agents.brain import (BackendContext, BrainContext, BrainSettings, BucketRequest, ExecutionRecord,
                                      RefineRequest, ScopeRequest, Usage)
from testcurator.agents.decision import Decision, FileDecision
from testcurator.agents.registry import make_brain
from testcurator.agents.llm.brain import FALLBACK_BRAIN, LLMBrain
from testcurator.config.llm import LLMSettings
from testcurator.errors import BadInputError
from testcurator.prompts import load_prompt


class StandIn:
    """A tiny offline brain: skips every test, keeps every path (the real one is agents/offline/brain.py)."""

    name = "offline"

    def __init__(self) -> None:
        self.usage = Usage()
        self.asked: list[str] = []

    def scope(self, requests: Sequence[ScopeRequest], ctx: BrainContext) -> list[FileDecision]:
        self.asked += [r.path for r in requests]
        return [FileDecision(r.path, True, "offline keeps", ("rule",), "offline", None) for r in requests]

    def bucket(self, requests: Sequence[BucketRequest], ctx: BrainContext) -> list[Decision]:
        self.asked += [r.test for r in requests]
        return [Decision(r.test, "skip", "offline skips", ("rule",), "offline", None) for r in requests]

    def refine(self, requests: Sequence[RefineRequest], ctx: BrainContext) -> list[Decision]:
        self.asked += [r.test for r in requests]
        return [Decision(r.test, "xfail", "offline xfails", ("rule",), "offline", None) for r in requests]


TESTS = ["TestA::test_one", "TestA::test_two", "TestA::test_mm"]
REQUESTS = [BucketRequest(t, "test_a.py", f"hash-{t}", aten_ops=("aten::add.Tensor",)) for t in TESTS[:2]] + [
    BucketRequest("TestA::test_mm", "test_a.py", "hash-mm", ops=("_scaled_mm",), aten_ops=("aten::_scaled_mm",))]
BACKEND = BackendContext(name="dev", device="dev", unsupported_ops=frozenset({"aten::_scaled_mm", "_scaled_mm"}))


@pytest.fixture
def ctx(tmp_path: Path) -> BrainContext:
    return BrainContext(backend=BACKEND, known_tests=frozenset(TESTS), tree=tmp_path)


def item(test: str, mode: str = "mandatory_success") -> dict[str, object]:
    return {"test": test, "reasoning": f"the evidence says {test} belongs here", "evidence": ["ops: add"], "mode": mode,
            "exclude_dtypes": [], "exclude_ops": [], "needs_review": False, "missing": []}


def good_batch(tests: Sequence[str]) -> dict[str, object]:
    return {"decisions": [item(t, "xfail_strict" if t.endswith("mm") else "mandatory_success") for t in tests]}


def make(settings: LLMSettings, tmp_path: Path) -> tuple[LLMBrain, StandIn]:
    fallback = StandIn()
    return LLMBrain(settings, fallback=fallback, state_dir=tmp_path / "state"), fallback


def test_batches_and_accepts_valid_answers(fake_openai: FakeOpenAI, llm_settings: LLMSettings, ctx: BrainContext, tmp_path: Path) -> None:
    brain, fallback = make(replace(llm_settings, batch_size=2), tmp_path)
    fake_openai.script(answer(good_batch(TESTS[:2])), answer(good_batch(TESTS[2:])))
    decisions = brain.bucket(REQUESTS, ctx)
    assert [d.test for d in decisions] == TESTS
    assert [d.mode for d in decisions] == ["mandatory_success", "mandatory_success", "xfail_strict"]
    assert {d.brain for d in decisions} == {"llm"} and fallback.asked == []
    assert decisions[0].prompt_hash == load_prompt("bucket").hash and decisions[0].reason == "the evidence says TestA::test_one belongs here"
    assert len(fake_openai.requests) == 2 and brain.usage.calls == 2
    # The answer is pinned to the batch: one required property per requested test, in order.
    decisions = fake_openai.requests[0]["response_format"]["json_schema"]["schema"]["properties"]["decisions"]
    assert decisions["required"] == list(decisions["properties"]) == TESTS[:2] and decisions["additionalProperties"] is False
    item = fake_openai.requests[0]["response_format"]["json_schema"]["schema"]["$defs"]["item"]
    assert decisions["properties"][TESTS[0]] == {"$ref": "#/$defs/item"} and "test" not in item["properties"]


def test_keyed_answers_are_read_back_in_list_form(fake_openai: FakeOpenAI, llm_settings: LLMSettings, ctx: BrainContext, tmp_path: Path) -> None:
    brain, fallback = make(replace(llm_settings, structured_output="json_object_schema"), tmp_path)
    keyed = {"decisions": {t: {k: v for k, v in item(t, "skip").items() if k != "test"} for t in TESTS}}
    fake_openai.script(answer(keyed))
    decisions = brain.bucket(REQUESTS, ctx)
    assert [(d.test, d.mode, d.brain) for d in decisions] == [(t, "skip", "llm") for t in TESTS] and fallback.asked == []
    schema = fake_openai.requests[0]["response_format"]["schema"]
    assert schema["properties"]["decisions"]["required"] == TESTS
    assert '"required":["TestA::test_one","TestA::test_two","TestA::test_mm"]' in fake_openai.requests[0]["messages"][0]["content"]


def test_rerun_over_unchanged_tests_makes_no_call(fake_openai: FakeOpenAI, llm_settings: LLMSettings, ctx: BrainContext, tmp_path: Path) -> None:
    fake_openai.script(answer(good_batch(TESTS)))
    first = make(llm_settings, tmp_path)[0].bucket(REQUESTS, ctx)
    again = make(replace(llm_settings, batch_size=1), tmp_path)[0]  # other batching: still per-test hits
    assert again.bucket(REQUESTS, ctx) == first
    assert len(fake_openai.requests) == 1 and again.usage.calls == 0 and again.usage.cached_items == 3
    changed = [replace(REQUESTS[0], content_hash="new")] + REQUESTS[1:]
    fake_openai.script(answer(good_batch(TESTS[:1])))
    again.bucket(changed, ctx)
    assert len(fake_openai.requests) == 2
    assert "TestA::test_two" not in fake_openai.requests[1]["messages"][1]["content"]


def test_a_cached_answer_the_rails_now_refuse_is_asked_again(fake_openai: FakeOpenAI, llm_settings: LLMSettings,
                                                             ctx: BrainContext, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    fake_openai.script(answer(good_batch(TESTS)))
    make(llm_settings, tmp_path)[0].bucket(REQUESTS, ctx)
    # A stricter reason rail than when the answers were cached ("the evidence says X belongs here": 5 words).
    monkeypatch.setattr("testcurator.agents.rails.MIN_REASON_WORDS", 6)
    fake_openai.script(answer(good_batch(TESTS)), answer(good_batch(TESTS)))
    again = make(llm_settings, tmp_path)[0]
    decisions = again.bucket(REQUESTS, ctx)
    # The batch's answer comes back from the client's cache; the re-ask with the rail's error is new.
    assert again.usage.cached_items == 3 and again.usage.reasks == 1 and len(fake_openai.requests) == 2
    assert {d.brain for d in decisions} == {"llm->offline"} and all("rail no_reason" in d.reason for d in decisions)


@pytest.mark.parametrize(("bad", "rule"), [
    ({"decisions": [item("TestA::test_one"), item("TestA::test_invented"), item("TestA::test_mm", "skip")]}, "missing"),
    ({"decisions": [item("TestA::test_one"), item("TestA::test_two"), item("TestA::test_mm")]}, "unsupported_mandatory"),
])
def test_rail_failure_is_reasked_then_fixed(fake_openai: FakeOpenAI, llm_settings: LLMSettings, ctx: BrainContext,
                                            tmp_path: Path, bad: dict[str, object], rule: str) -> None:
    brain, fallback = make(llm_settings, tmp_path)
    fake_openai.script(answer(bad), answer(good_batch(TESTS)))
    decisions = brain.bucket(REQUESTS, ctx)
    assert {d.brain for d in decisions} == {"llm"} and fallback.asked == []
    assert f"[{rule}]" in fake_openai.requests[1]["messages"][-1]["content"]
    assert fake_openai.requests[1]["messages"][-2]["role"] == "assistant"
    assert brain.usage.reasks == 1 and brain.usage.rail_violations >= 1


def test_rail_failure_twice_falls_back_to_offline(fake_openai: FakeOpenAI, llm_settings: LLMSettings, ctx: BrainContext, tmp_path: Path) -> None:
    bad = {"decisions": [item("TestA::test_one"), item("TestA::test_two"), item("TestA::test_mm")]}
    invented = {"decisions": [item("TestA::test_nonexistent")]}
    brain, fallback = make(llm_settings, tmp_path)
    fake_openai.script(answer(bad), answer(invented))
    decisions = brain.bucket(REQUESTS, ctx)
    assert [d.brain for d in decisions] == ["llm", "llm", FALLBACK_BRAIN]
    assert fallback.asked == ["TestA::test_mm"]
    mm = decisions[2]
    assert mm.mode == "skip" and "rail" in mm.reason and any(e.startswith("llm: rail") for e in mm.evidence)
    assert brain.usage.fallbacks == 1
    # The rejection is remembered: a rerun asks nobody but the offline brain.
    rerun, fallback2 = make(llm_settings, tmp_path)
    assert rerun.bucket(REQUESTS, ctx) == decisions
    assert len(fake_openai.requests) == 2 and fallback2.asked == ["TestA::test_mm"]


def test_answer_errors_fall_back_without_remembering(fake_openai: FakeOpenAI, llm_settings: LLMSettings, ctx: BrainContext, tmp_path: Path) -> None:
    brain, fallback = make(replace(llm_settings, max_tries=2), tmp_path)
    fake_openai.script(answer({"decisions": "nope"}), answer({"decisions": "nope"}))
    decisions = brain.bucket(REQUESTS[:1], ctx)
    assert decisions[0].brain == FALLBACK_BRAIN and "invalid answer after 2 tries" in decisions[0].reason
    fake_openai.script(answer(good_batch(TESTS[:1])))
    assert brain.bucket(REQUESTS[:1], ctx)[0].brain == "llm"


def test_dead_endpoint_falls_back_and_stops_asking(fake_openai: FakeOpenAI, llm_settings: LLMSettings, ctx: BrainContext, tmp_path: Path) -> None:
    brain, fallback = make(replace(llm_settings, batch_size=1, max_retries=0), tmp_path)
    fake_openai.script(Status(500), Status(500), Status(500))
    decisions = brain.bucket(REQUESTS, ctx)
    assert len(fake_openai.requests) == 2  # the third batch is not sent: the endpoint is down
    assert [d.brain for d in decisions] == [FALLBACK_BRAIN] * 3 and fallback.asked == TESTS
    assert "endpoint error: InternalServerError (HTTP 500)" in decisions[0].reason
    assert "endpoint down: not asked" in decisions[2].reason
    assert brain.client.status()["down"] and brain.usage.fallbacks == 3


def test_batches_fit_the_context_window(fake_openai: FakeOpenAI, llm_settings: LLMSettings, ctx: BrainContext, tmp_path: Path) -> None:
    big = [BucketRequest(f"TestA::test_{i}", "test_a.py", f"h{i}", source="x = 1\n" * 150) for i in range(4)]
    names = [r.test for r in big]
    wide = replace(ctx, known_tests=frozenset(names))
    # ~300 tokens of source each: a 2,750-token window (minus answer and margin) holds two.
    brain, _ = make(replace(llm_settings, context_tokens=2750, batch_size=10, output_tokens_per_item=100), tmp_path)
    fake_openai.script(*(answer({"decisions": [item(t, "skip") for t in names[i:i + 2]]}) for i in (0, 2)))
    decisions = brain.bucket(big, wide)
    assert [d.brain for d in decisions] == ["llm"] * 4 and len(fake_openai.requests) == 2
    assert all(r["max_tokens"] == 2 * 100 + 64 for r in fake_openai.requests)
    assert brain.usage.estimated_prompt_tokens > 0


def test_an_item_too_large_for_the_window_is_never_sent(fake_openai: FakeOpenAI, llm_settings: LLMSettings, ctx: BrainContext, tmp_path: Path) -> None:
    huge = replace(REQUESTS[0], source="y = 2\n" * 3000)
    brain, fallback = make(replace(llm_settings, context_tokens=4096), tmp_path)
    fake_openai.script(answer(good_batch(TESTS[1:2])))
    decisions = brain.bucket([huge, REQUESTS[1]], ctx)
    assert [d.brain for d in decisions] == [FALLBACK_BRAIN, "llm"] and len(fake_openai.requests) == 1
    assert "too large for the model's context window (4096 tokens)" in decisions[0].reason


def test_rejected_answers_leave_one_line_and_no_model_text(fake_openai: FakeOpenAI, llm_settings: LLMSettings, ctx: BrainContext, tmp_path: Path) -> None:
    invented = {"decisions": [item("../../etc/passwd"), item("TestA::test_two"), item("TestA::test_mm")]}
    brain, _ = make(llm_settings, tmp_path)
    fake_openai.script(answer(invented), answer(invented))
    decisions = brain.bucket(REQUESTS, ctx)
    one = decisions[0]
    assert one.brain == FALLBACK_BRAIN and "\n" not in one.reason
    assert "etc/passwd" not in one.reason and not any("etc/passwd" in e for e in one.evidence)
    assert "rail missing: no decision for this request" in one.reason
    assert "the answer named 1 name not asked about (rail unknown_test)" in one.reason
    audit = (tmp_path / "state" / "llm_audit.jsonl").read_text()
    assert "etc/passwd" in audit and "rails_rejected" in audit


def test_refine_rejects_mandatory_success_that_failed(fake_openai: FakeOpenAI, llm_settings: LLMSettings, ctx: BrainContext, tmp_path: Path) -> None:
    failed = ExecutionRecord("test_one_dev_float32", ("failed", "failed"), dtype="float32", failure_class="crash")
    request = RefineRequest(REQUESTS[0], previous=None, executions=(failed,))
    brain, fallback = make(llm_settings, tmp_path)
    fake_openai.script(answer(good_batch(TESTS[:1])), answer(good_batch(TESTS[:1])))
    decision = brain.refine([request], ctx)[0]
    assert decision.brain == FALLBACK_BRAIN and decision.mode == "xfail"
    assert "contradicts_execution" in decision.reason


def scope_item(path: str) -> dict[str, object]:
    return {"path": path, "reasoning": "its tests exercise eager ops", "evidence": [], "keep": True, "needs_review": False, "missing": []}


def test_scope_path_outside_tree_falls_back(fake_openai: FakeOpenAI, llm_settings: LLMSettings, ctx: BrainContext, tmp_path: Path) -> None:
    requests = [ScopeRequest("test_ops.py", "file"), ScopeRequest("inductor", "dir")]
    escape = {"decisions": [scope_item("test_ops.py"), scope_item("../../etc/passwd")]}
    brain, fallback = make(llm_settings, tmp_path)
    fake_openai.script(answer(escape), answer(escape))
    decisions = brain.scope(requests, ctx)
    assert [(d.path, d.brain) for d in decisions] == [("test_ops.py", "llm"), ("inductor", FALLBACK_BRAIN)]
    assert "path_outside_tree" in fake_openai.requests[1]["messages"][-1]["content"]
    assert fallback.asked == ["inductor"]


def test_registry_is_explicit_and_llm_needs_an_endpoint(llm_settings: LLMSettings, tmp_path: Path) -> None:
    assert set(registry.BRAINS) == {"offline", "llm"}
    with pytest.raises(BadInputError, match="OPENAI_BASE_URL"):
        make_brain("llm", BrainSettings(llm=None, fallback=StandIn()))
    with pytest.raises(BadInputError, match="unknown brain"):
        make_brain("oracle", BrainSettings())
    made = make_brain("llm", BrainSettings(llm=llm_settings, state_dir=tmp_path, fallback=StandIn()))
    assert isinstance(made, LLMBrain) and made.fallback.name == "offline"


def test_an_exclusion_the_test_does_not_have_is_reasked(fake_openai: FakeOpenAI, llm_settings: LLMSettings,
                                                         ctx: BrainContext, tmp_path: Path) -> None:
    # test_mm is parametrized over one OpInfo op; a model inventing another one to exclude
    # would write an edit `validate --level 2` rejects: a rail, re-asked with the reason.
    invented = good_batch(TESTS)
    invented["decisions"][2] = {**item("TestA::test_mm", "xfail_strict"), "exclude_ops": ["addmm"]}  # type: ignore[index]
    brain, fallback = make(llm_settings, tmp_path)
    fake_openai.script(answer(invented), answer(good_batch(TESTS)))
    decisions = brain.bucket(REQUESTS, ctx)
    assert {d.brain for d in decisions} == {"llm"} and fallback.asked == []
    assert "[bad_edit] exclude_ops addmm: the test's OpInfo ops are _scaled_mm" in fake_openai.requests[1]["messages"][-1]["content"]


@pytest.mark.parametrize(("excluded", "reasked"), [
    # An op in one of the test's dtypes only (prompts/bucket.md: `op@dtype`) is an edit the
    # config carries; the same op at a dtype the test does not run is not.
    ("mul@float64", None),
    ("mul@int8", "[bad_edit] exclude_ops mul@int8: the test's OpInfo ops are mul and its dtypes float32, float64"),
])
def test_an_op_excluded_in_one_dtype_is_kept_when_the_test_runs_it(
        fake_openai: FakeOpenAI, llm_settings: LLMSettings, ctx: BrainContext, tmp_path: Path,
        excluded: str, reasked: str | None) -> None:
    request = BucketRequest("TestA::test_mm", "test_a.py", "hash-mm", ops=("mul",), dtypes=("float32", "float64"),
                            aten_ops=("aten::mul.Tensor",))
    brain, fallback = make(llm_settings, tmp_path)
    fake_openai.script(answer({"decisions": [{**item("TestA::test_mm"), "exclude_ops": [excluded]}]}),
                       answer({"decisions": [item("TestA::test_mm", "xfail_strict")]}))
    [decision] = brain.bucket([request], ctx)
    if reasked is None:
        assert len(fake_openai.requests) == 1 and decision.exclude_ops == (excluded,)
    else:
        assert reasked in fake_openai.requests[1]["messages"][-1]["content"] and decision.exclude_ops == ()
    assert decision.brain == "llm" and fallback.asked == []


def test_under_a_budget_the_first_question_measures_and_the_rest_waits_for_the_budget(
        fake_openai: FakeOpenAI, llm_settings: LLMSettings, ctx: BrainContext, tmp_path: Path) -> None:
    # The first answer streams slowly (0.05 s per chunk, well over the 0.5 s budget in all):
    # it is sent alone, and finishes; then the budget is spent and nothing else is sent.
    brain, fallback = make(replace(llm_settings, budget_s=0.5), tmp_path)
    fake_openai.script(slow(good_batch(TESTS[:1]), token_s=0.05))
    decisions = brain.bucket(REQUESTS, ctx)
    sent = fake_openai.requests[0]["messages"][-1]["content"]
    assert len(fake_openai.requests) == 1 and "TestA::test_one" in sent and "TestA::test_two" not in sent
    assert [d.brain for d in decisions] == ["llm", FALLBACK_BRAIN, FALLBACK_BRAIN]
    assert fallback.asked == TESTS[1:] and fake_openai.hangups == 0
    for d in decisions[1:]:
        assert "not the LLM's decision: not asked: the LLM's time budget (0.5 s) was spent" in d.reason
    assert brain.usage.over_budget == 2 and brain.usage.fallbacks == 2


def test_an_answer_cut_off_at_the_cap_keeps_its_complete_items_and_asks_only_the_rest(
        fake_openai: FakeOpenAI, llm_settings: LLMSettings, ctx: BrainContext, tmp_path: Path) -> None:
    full = json.dumps(good_batch(TESTS))
    cut = full[: full.index('"TestA::test_two"') + 30]  # test_one complete, test_two cut mid-item
    brain, fallback = make(llm_settings, tmp_path)
    fake_openai.script(Reply(cut, finish_reason="length"), answer(good_batch(TESTS[1:])))
    decisions = brain.bucket(REQUESTS, ctx)
    assert [d.brain for d in decisions] == ["llm"] * 3 and fallback.asked == []
    second = fake_openai.requests[1]["messages"][-1]["content"]
    assert "TestA::test_one" not in second and "TestA::test_two" in second and "TestA::test_mm" in second
    assert len(fake_openai.requests) == 2 and brain.usage.reasks == 1
