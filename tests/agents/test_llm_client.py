from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, Reply, Status, answer, delayed, malformed
from pydantic import BaseModel

from testcurator.agents.llm_client import LLMAnswerError, LLMSettings, LLMTransportError, StructuredClient
from testcurator.errors import BadInputError
from testcurator.prompts import load_prompt


class Verdict(BaseModel):
    reasoning: str
    keep: bool


GOOD = Verdict(reasoning="matches the eager_ops hook", keep=True)
VARS = {"backend": {"name": "dev"}, "candidates": [{"path": "test_ops.py"}]}


def call(client: StructuredClient, content: str = "c1") -> Verdict:
    return client.call(load_prompt("scope"), VARS, Verdict, content)


def test_valid_answer_is_parsed_and_accounted(fake_openai: FakeOpenAI, llm_settings: LLMSettings) -> None:
    fake_openai.script(answer(GOOD))
    client = StructuredClient(llm_settings)
    assert call(client) == GOOD
    sent = fake_openai.requests[0]
    assert sent["model"] == "fake-model"
    assert sent["response_format"]["type"] == "json_schema"
    assert [m["role"] for m in sent["messages"]] == ["system", "user"]
    assert "test_ops.py" in sent["messages"][1]["content"]
    assert (client.usage.calls, client.usage.prompt_tokens, client.usage.completion_tokens) == (1, 11, 7)


@pytest.mark.parametrize("bad", [
    malformed(),
    Reply('{"reasoning": "x"}'),                 # schema: keep missing
    Reply('{"reasoning": "x", "keep": "perhaps"}'),
    Reply('{"reasoning": "x", "ke', finish_reason="length"),
])
def test_unusable_answer_is_reasked_with_the_error(fake_openai: FakeOpenAI, llm_settings: LLMSettings, bad: Reply) -> None:
    fake_openai.script(bad, answer(GOOD))
    client = StructuredClient(llm_settings)
    assert call(client) == GOOD
    assert len(fake_openai.requests) == 2
    followup = fake_openai.requests[1]["messages"]
    assert followup[-1]["role"] == "user" and "could not be accepted" in followup[-1]["content"]
    assert (client.usage.reasks, client.usage.failures, client.usage.calls) == (1, 1, 2)


def test_gives_up_after_max_tries_with_typed_error(fake_openai: FakeOpenAI, llm_settings: LLMSettings) -> None:
    fake_openai.script(malformed(), malformed(), malformed())
    with pytest.raises(LLMAnswerError) as info:
        call(StructuredClient(llm_settings))
    assert info.value.attempts == 3 and len(fake_openai.requests) == 3
    assert "json" in str(info.value.last_error).lower()


@pytest.mark.parametrize("code", [429, 500])
def test_http_errors_are_retried_by_the_client(fake_openai: FakeOpenAI, llm_settings: LLMSettings, code: int) -> None:
    fake_openai.script(Status(code), answer(GOOD))
    assert call(StructuredClient(llm_settings)) == GOOD
    assert len(fake_openai.requests) == 2


@pytest.mark.parametrize("code", [429, 500])
def test_http_errors_past_retries_are_transport_errors(fake_openai: FakeOpenAI, llm_settings: LLMSettings, code: int) -> None:
    fake_openai.script(Status(code), Status(code))
    client = StructuredClient(llm_settings)
    with pytest.raises(LLMTransportError):
        call(client)
    assert len(fake_openai.requests) == 2 and client.usage.failures == 1


def test_timeout_is_retried_then_answered(fake_openai: FakeOpenAI, llm_settings: LLMSettings) -> None:
    fake_openai.script(delayed(GOOD, 1.5), answer(GOOD))
    assert call(StructuredClient(llm_settings)) == GOOD
    assert len(fake_openai.requests) == 2


def test_timeout_without_retries_is_a_transport_error(fake_openai: FakeOpenAI, llm_settings: LLMSettings) -> None:
    fake_openai.script(delayed(GOOD, 1.5))
    client = StructuredClient(replace(llm_settings, max_retries=0))
    with pytest.raises(LLMTransportError, match="Timeout"):
        call(client)


def test_cache_persists_across_clients(fake_openai: FakeOpenAI, llm_settings: LLMSettings, tmp_path: Path) -> None:
    fake_openai.script(answer(GOOD), answer(Verdict(reasoning="other", keep=False)))
    assert call(StructuredClient(llm_settings, tmp_path)) == GOOD
    again = StructuredClient(llm_settings, tmp_path)
    assert call(again) == GOOD
    assert len(fake_openai.requests) == 1 and again.usage.cache_hits == 1 and again.usage.calls == 0
    assert call(again, content="changed") == Verdict(reasoning="other", keep=False)  # new content: asked
    other_model = StructuredClient(replace(llm_settings, model="other"), tmp_path)
    fake_openai.script(answer(GOOD))
    call(other_model)
    assert len(fake_openai.requests) == 3


def test_settings_from_env_never_default_to_public_api() -> None:
    assert LLMSettings.from_env({}) is None
    assert LLMSettings.from_env({"OPENAI_API_KEY": "k", "TESTCURATOR_LLM_MODEL": "m"}) is None
    with pytest.raises(BadInputError, match="OPENAI_BASE_URL"):
        LLMSettings.require({})
    with pytest.raises(BadInputError, match="no model"):
        LLMSettings.from_env({"OPENAI_BASE_URL": "http://h/v1"})
    env = {"OPENAI_BASE_URL": "http://h/v1", "OPENAI_API_KEY": "secret", "TESTCURATOR_LLM_MODEL": "m"}
    settings = LLMSettings.from_env(env, model="explicit", timeout=5.0)
    assert settings is not None
    assert (settings.base_url, settings.model, settings.api_key, settings.timeout) == ("http://h/v1", "explicit", "secret", 5.0)
    assert "secret" not in repr(settings)
