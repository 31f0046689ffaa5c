"""Negotiation helpers and the context budget, on their own (the client tests drive them
through a server)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from testcurator.agents.llm.answers import BucketAnswer
from testcurator.agents.llm.budget import MARGIN_TOKENS, TokenEstimator, output_cap, plan_batches
from testcurator.agents.llm.negotiate import (OUTPUT_MODES, Narrow, Negotiator, answer_schema, compact_schema, extract_json, is_shape_error,
                                              keyed, parse_answer, response_format, unkey, with_schema_in_prompt)

LLAMA_CPP_PYTHON = "1 validation error: {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\"}"


@pytest.mark.parametrize(("status", "message", "shape"), [
    (500, LLAMA_CPP_PYTHON, True),                                               # llama-cpp-python
    (400, "response_format type json_schema is not supported by this model", True),  # vLLM-style
    (422, "Unrecognized request argument supplied: response_format", True),
    (500, "CUDA out of memory", False),                                          # a fault: retried, not a step down
    (429, "response_format is rate limited", False),                             # never a shape status
    (400, "This model's maximum context length is 4096 tokens", False),
])
def test_shape_errors_are_told_from_faults(status: int, message: str, shape: bool) -> None:
    assert is_shape_error(status, message) is shape


def test_compact_schema_is_closed_inlined_and_untitled() -> None:
    schema = compact_schema(BucketAnswer)
    item = schema["properties"]["decisions"]["items"]
    assert "$defs" not in schema and "$ref" not in str(schema) and "title" not in str(schema)
    assert item["additionalProperties"] is False and item["required"][:2] == ["test", "reasoning"]
    assert item["properties"]["mode"]["enum"] == ["mandatory_success", "xfail", "xfail_strict", "skip"]


def test_each_mode_asks_its_own_way() -> None:
    assert response_format("json_schema", BucketAnswer)["json_schema"]["strict"] is True
    assert response_format("json_object_schema", BucketAnswer)["schema"] == compact_schema(BucketAnswer)
    assert response_format("json_object", BucketAnswer) == {"type": "json_object"}
    assert response_format("text", BucketAnswer) is None
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    assert with_schema_in_prompt("json_schema", messages, BucketAnswer) == messages
    for mode in OUTPUT_MODES[1:]:
        sent = with_schema_in_prompt(mode, messages, BucketAnswer)
        assert sent[0]["content"].startswith("S\n\n") and '"xfail_strict"' in sent[0]["content"] and sent[1] == messages[1]


@pytest.mark.parametrize("text", ['{"decisions": []}', 'Here:\n```json\n{"decisions": []}\n```', 'Sure. {"decisions": []} Done.'])
def test_json_is_cut_out_of_plain_text(text: str) -> None:
    assert extract_json(text) == '{"decisions": []}'
    assert parse_answer("text", text, BucketAnswer) == BucketAnswer(decisions=[])


def test_json_modes_do_not_guess() -> None:
    with pytest.raises(ValidationError):
        parse_answer("json_object", 'Sure. {"decisions": []}', BucketAnswer)


def test_negotiator_steps_once_per_rung_and_stops_at_the_bottom() -> None:
    nego = Negotiator()
    assert nego.step_down("e", "json_schema", "500") == "json_object_schema"
    assert nego.step_down("e", "json_schema", "500 again (another thread)") == "json_object_schema"
    assert nego.mode("e") == "json_object_schema" and nego.mode("other") == "json_schema"
    assert nego.step_down("e", "json_object_schema", "x") == "json_object"
    assert nego.step_down("e", "json_object", "x") == "text"
    assert nego.step_down("e", "text", "x") is None
    assert len(nego.steps) == 3


def test_batches_respect_window_items_and_output_cap() -> None:
    plan = plan_batches(1000, [500] * 6, context_tokens=3000, max_items=10, output_per_item=100, max_output_tokens=2048)
    # 1000 fixed + n*500 + (100n+64) + margin <= 3000  ->  n <= 2
    assert [b.indices for b in plan.batches] == [(0, 1), (2, 3), (4, 5)] and plan.too_large == ()
    assert all(b.prompt_tokens + b.max_tokens + MARGIN_TOKENS <= 3000 for b in plan.batches)
    assert [b.indices for b in plan_batches(10, [1] * 5, context_tokens=10**6, max_items=2, output_per_item=1,
                                            max_output_tokens=99).batches] == [(0, 1), (2, 3), (4,)]
    capped = plan_batches(10, [1] * 5, context_tokens=10**6, max_items=50, output_per_item=100, max_output_tokens=250)
    assert [len(b.indices) for b in capped.batches] == [2, 2, 1] and output_cap(2, 100, 250) == 250
    huge = plan_batches(1000, [10, 5000, 10], context_tokens=4096, max_items=10, output_per_item=100, max_output_tokens=2048)
    assert huge.too_large == (1,) and [b.indices for b in huge.batches] == [(0, 2)]


def test_token_estimate_learns_the_denser_ratio_only() -> None:
    est = TokenEstimator()
    assert est.estimate("x" * 300) == 100
    est.observe(300, 150)
    assert est.estimate("x" * 300) == 150
    est.observe(300, 50)  # a looser ratio never relaxes the estimate
    assert est.estimate("x" * 300) == 150


def test_a_narrowed_answer_is_keyed_by_the_batch_names_and_read_back_as_a_list() -> None:
    narrow = Narrow("decisions", "test", ("A::a", "A::b"))
    schema = answer_schema(BucketAnswer, narrow)["properties"]["decisions"]
    assert schema["required"] == ["A::a", "A::b"] and schema["additionalProperties"] is False
    full = answer_schema(BucketAnswer, narrow)
    assert schema["properties"]["A::a"] == {"$ref": "#/$defs/item"} and "test" not in full["$defs"]["item"]["required"]
    body = {"reasoning": "r", "evidence": [], "mode": "skip", "exclude_dtypes": [], "exclude_ops": [],
            "needs_review": False, "missing": []}
    listed = unkey({"decisions": {"A::a": body, "A::b": body}}, narrow)
    assert [d["test"] for d in listed["decisions"]] == ["A::a", "A::b"]
    assert keyed(listed, narrow) == {"decisions": {"A::a": body, "A::b": body}}
    answer = parse_answer("json_object_schema", json.dumps({"decisions": {"A::a": body}}), BucketAnswer, narrow)
    assert [d.test for d in answer.decisions] == ["A::a"]
    with pytest.raises(ValidationError):
        parse_answer("json_object_schema", "not json", BucketAnswer, narrow)


@pytest.mark.parametrize("cut, kept", [
    ('{"decisions": [{"test": "a", "r": "x}]"}, {"test": "b", "r": "y\\" {"}, {"te',
     '{"decisions": [{"test": "a", "r": "x}]"}, {"test": "b", "r": "y\\" {"}]}'),
    ('{"decisions": {"A": {"r": [1, 2]}, "B": {"r": [', '{"decisions": {"A": {"r": [1, 2]}}}'),
    ('{"decisions": [{"te', None),
    ("no json at all", None),
])
def test_a_cut_off_answer_is_closed_after_its_last_complete_item(cut: str, kept: str | None) -> None:
    from testcurator.agents.llm.negotiate import complete_items

    assert complete_items(cut) == kept
