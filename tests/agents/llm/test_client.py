from __future__ import annotations

import json
import socket
import time

from dataclasses import replace
from pathlib import Path

import pytest
from fake_openai import (LLAMA_CPP_PYTHON_REJECTS, FakeOpenAI, Reply, Status, answer, format_mode, hung, malformed, slow,
                         stalled)
from pydantic import BaseModel

from testcurator.agents.llm.client import LLMAnswerError, StructuredClient
from testcurator.config.llm import LLMSettings
from testcurator.agents.llm import transport as llm_transport
from testcurator.agents.llm.transport import LLMBudgetError, LLMTransportError
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
    assert sent["response_format"]["type"] == "json_schema" and sent["response_format"]["json_schema"]["strict"]
    assert sent["max_tokens"] == llm_settings.max_output_tokens
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
    assert len(fake_openai.requests) == 2 and client.usage.failures == 1 and client.usage.transport_retries == 1


# A timeout the hung request always reaches, and the answer after it on a loaded machine never.
HUNG_TIMEOUT_S = 2.0


def test_silence_before_the_first_token_is_never_resent_and_the_endpoint_is_down(
        fake_openai: FakeOpenAI, llm_settings: LLMSettings) -> None:
    # The server may still be working on it: a re-send would only queue behind it.
    fake_openai.script(hung(), answer(GOOD))
    client = StructuredClient(replace(llm_settings, idle_timeout=HUNG_TIMEOUT_S))
    with pytest.raises(LLMTransportError, match="Timeout"):
        call(client)
    assert len(fake_openai.requests) == 1 and client.usage.transport_retries == 0 and client.usage.failures == 1
    assert client.down and "idle timeout" in client.down
    with pytest.raises(LLMTransportError, match="down"):
        call(client, content="c2")
    assert len(fake_openai.requests) == 1  # down: no second request reaches the server


def test_a_slow_answer_that_keeps_coming_is_never_abandoned(fake_openai: FakeOpenAI, llm_settings: LLMSettings) -> None:
    # 0.4 s between chunks, 2 s idle timeout: the whole answer takes far longer than the idle
    # timeout (a total timeout would have hung up), and every chunk comes within it.
    fake_openai.script(slow(GOOD, token_s=0.4))
    client = StructuredClient(replace(llm_settings, idle_timeout=HUNG_TIMEOUT_S))
    started = time.monotonic()
    assert call(client) == GOOD
    assert time.monotonic() - started > 2 * HUNG_TIMEOUT_S
    assert fake_openai.hangups == 0 and len(fake_openai.requests) == 1 and client.usage.failures == 0


def test_keepalives_while_the_server_reads_the_prompt_are_not_silence(fake_openai: FakeOpenAI,
                                                                      llm_settings: LLMSettings) -> None:
    # llama-cpp-python pings every 15 s while it reads a long prompt or waits its turn.
    fake_openai.script(slow(GOOD, token_s=0.0, delay=3 * HUNG_TIMEOUT_S, keepalive=0.5))
    client = StructuredClient(replace(llm_settings, idle_timeout=HUNG_TIMEOUT_S))
    assert call(client) == GOOD
    assert fake_openai.hangups == 0 and client.down is None


def test_an_answer_that_stalls_midway_fails_once_without_a_resend(fake_openai: FakeOpenAI,
                                                                  llm_settings: LLMSettings) -> None:
    fake_openai.script(stalled(GOOD), answer(GOOD))
    client = StructuredClient(replace(llm_settings, idle_timeout=HUNG_TIMEOUT_S))
    with pytest.raises(LLMTransportError):
        call(client)
    assert len(fake_openai.requests) == 1 and client.down is None  # one stall is not "down"
    assert call(client, content="c2") == GOOD


def test_streamed_answers_teach_the_pace(fake_openai: FakeOpenAI, llm_settings: LLMSettings) -> None:
    fake_openai.script(slow(GOOD, token_s=0.05, delay=0.3))
    client = StructuredClient(llm_settings)
    call(client)
    pace = client.transport.pace
    assert fake_openai.requests[0]["stream"] is True
    assert fake_openai.requests[0]["stream_options"] == {"include_usage": True}
    # 7 completion tokens (the usage chunk) over the time after the first chunk; 11 prompt
    # tokens over the 0.3 s before it.
    assert pace.measured and pace.completion_tokens == 7 and 0 < pace.tokens_per_s < 7 / 0.2
    assert pace.prompt_tokens == 11 and pace.prompt_tokens_per_s < 11 / 0.3
    assert client.usage.completion_tokens == 7


def test_the_budget_stops_sending_once_spent(fake_openai: FakeOpenAI, llm_settings: LLMSettings) -> None:
    fake_openai.script(slow(GOOD, token_s=0.1), answer(GOOD))
    client = StructuredClient(replace(llm_settings, budget_s=0.5))
    assert call(client) == GOOD  # the first request is sent, and finishes past the budget
    assert client.transport.pace.spent_s(time.monotonic()) > 0.5
    with pytest.raises(LLMBudgetError, match="budget"):
        call(client, content="c2")
    assert len(fake_openai.requests) == 1


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


LADDER = ["json_schema", "json_object_schema", "json_object", "text"]


@pytest.mark.parametrize("refused", [1, 2, 3])
def test_refused_formats_step_down_and_are_remembered(fake_openai: FakeOpenAI, llm_settings: LLMSettings, tmp_path: Path,
                                                      refused: int) -> None:
    for mode in LADDER[:refused]:
        fake_openai.reject_formats[mode] = LLAMA_CPP_PYTHON_REJECTS
    fake_openai.script(answer(GOOD), answer(GOOD))
    client = StructuredClient(llm_settings, tmp_path)
    assert call(client) == GOOD
    assert [format_mode(r) for r in fake_openai.rejected] == LADDER[:refused]
    settled = LADDER[refused]
    assert client.mode == settled and format_mode(fake_openai.requests[0]) == settled
    # Below json_schema the schema travels in the prompt: the model cannot see it otherwise.
    assert '"additionalProperties":false' in fake_openai.requests[0]["messages"][0]["content"]
    assert client.usage.downshifts == refused and client.usage.failures == 0 and client.usage.calls == 1
    # Remembered for the endpoint: the next call goes straight to the settled mode.
    assert call(client, content="c2") == GOOD
    assert len(fake_openai.rejected) == refused and format_mode(fake_openai.requests[1]) == settled
    status = client.status()
    assert status["mode"] == settled and len(status["negotiation"]) == refused
    assert "Input should be 'text' or 'json_object'" in status["negotiation"][0]
    assert [r["kind"] for r in client.audit.read()] == ["format_rejected"] * refused


def test_plain_text_answers_are_cut_out_of_prose(fake_openai: FakeOpenAI, llm_settings: LLMSettings) -> None:
    fake_openai.script(Reply("Sure! Here it is:\n```json\n" + GOOD.model_dump_json() + "\n```\nHope that helps."))
    client = StructuredClient(replace(llm_settings, structured_output="text"))
    assert call(client) == GOOD
    assert "response_format" not in fake_openai.requests[0]


def test_a_server_error_that_is_not_about_the_format_is_not_a_step_down(fake_openai: FakeOpenAI, llm_settings: LLMSettings) -> None:
    fake_openai.script(Status(500), answer(GOOD))
    client = StructuredClient(llm_settings)
    assert call(client) == GOOD
    assert client.mode == "json_schema" and client.usage.downshifts == 0 and client.usage.transport_retries == 1


def test_invalid_answers_are_audited_with_one_line_problems(fake_openai: FakeOpenAI, llm_settings: LLMSettings, tmp_path: Path) -> None:
    raw = '{"reasoning": "see ../../etc/passwd", "keep": "perhaps"}'
    fake_openai.script(Reply(raw), Reply(raw), Reply(raw))
    client = StructuredClient(llm_settings, tmp_path)
    with pytest.raises(LLMAnswerError) as info:
        call(client)
    assert "\n" not in str(info.value) and "etc/passwd" not in str(info.value)
    assert "field keep: bool_parsing" in str(info.value)
    records = [json.loads(line) for line in (tmp_path / "llm_audit.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in records] == ["invalid_answer"] * 3 and records[0]["raw"] == raw


def test_context_window_from_the_server_else_the_setting(fake_openai: FakeOpenAI, llm_settings: LLMSettings) -> None:
    assert StructuredClient(replace(llm_settings, context_tokens=1234)).context_window()[0] == 1234
    fake_openai.models = [{"id": "other", "max_model_len": 99}, {"id": "fake-model", "max_model_len": 32768}]
    window, source = StructuredClient(llm_settings).context_window()
    assert window == 32768 and "/models" in source
    fake_openai.models = [{"id": "fake-model", "meta": {"n_ctx_train": 8192}}]
    assert StructuredClient(llm_settings).context_window()[0] == 8192


class _Clock:
    """llm_transport's ``time``: backoff sleeps are recorded, not slept."""

    perf_counter = staticmethod(time.perf_counter)
    monotonic = staticmethod(time.monotonic)

    def __init__(self) -> None:
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


def test_endpoint_down_is_retried_with_backoff_then_fails_fast(llm_settings: LLMSettings,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # "Fast" counted, not timed (a loaded machine makes any bound flaky): once down, a call
    # neither sleeps a backoff nor opens a connection. Both spies see them before it is down.
    clock, connects = _Clock(), []
    monkeypatch.setattr(llm_transport, "time", clock)
    real_connect = socket.socket.connect

    def connect(sock: socket.socket, address: object) -> None:
        connects.append(address)
        real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    dead = replace(llm_settings, base_url="http://127.0.0.1:9/v1", max_retries=2, retry_backoff=0.05)
    client = StructuredClient(dead)
    for _ in range(2):
        with pytest.raises(LLMTransportError):
            call(client)
    assert client.usage.transport_retries == 4 and client.down
    assert len(clock.sleeps) == 4 and len(connects) >= 6  # a try and two retries per call
    del clock.sleeps[:], connects[:]
    with pytest.raises(LLMTransportError) as info:
        call(client, content="later")
    assert info.value.down
    assert clock.sleeps == [] and connects == []  # no backoff, no network once down
    assert client.usage.transport_retries == 4


def test_settings_from_env_never_default_to_public_api() -> None:
    assert LLMSettings.from_env({}) is None
    assert LLMSettings.from_env({"OPENAI_API_KEY": "k", "TESTCURATOR_LLM_MODEL": "m"}) is None
    with pytest.raises(BadInputError, match="OPENAI_BASE_URL"):
        LLMSettings.require({})
    with pytest.raises(BadInputError, match="no model"):
        LLMSettings.from_env({"OPENAI_BASE_URL": "http://h/v1"})
    env = {"OPENAI_BASE_URL": "http://h/v1", "OPENAI_API_KEY": "secret", "TESTCURATOR_LLM_MODEL": "m"}
    settings = LLMSettings.from_env(env, model="explicit", idle_timeout=5.0)
    assert settings is not None
    assert (settings.base_url, settings.model, settings.api_key, settings.idle_timeout) == ("http://h/v1", "explicit", "secret", 5.0)
    assert "secret" not in repr(settings)
    tuned = LLMSettings.from_env({**env, "TESTCURATOR_LLM_CONTEXT_TOKENS": "8192", "TESTCURATOR_LLM_STRUCTURED_OUTPUT": "text"})
    assert tuned is not None and (tuned.context_tokens, tuned.structured_output) == (8192, "text")
    with pytest.raises(BadInputError, match="expected a number"):
        LLMSettings.from_env({**env, "TESTCURATOR_LLM_CONCURRENCY": "many"})
    with pytest.raises(BadInputError, match="structured_output"):
        LLMSettings.from_env(env, structured_output="xml")
    with pytest.raises(BadInputError, match="unknown llm setting"):
        LLMSettings.from_env(env, context_size=5)


@pytest.mark.parametrize("spare, sent_again", [(400, True), (250, False)])
def test_a_reask_never_asks_for_more_than_the_window_holds(fake_openai: FakeOpenAI, llm_settings: LLMSettings,
                                                           spare: int, sent_again: bool) -> None:
    from testcurator.agents.llm.client import MIN_ANSWER_TOKENS, problem_summary

    probe = StructuredClient(replace(llm_settings, context_tokens=100_000))
    first = probe._room(load_prompt("scope").render(VARS), Verdict, None)
    # The window holds the first question and `spare` tokens more; the invalid answer takes ~170.
    settings = replace(llm_settings, context_tokens=100_000 - first + spare, max_output_tokens=200)
    fake_openai.script(Reply('{"reasoning": "' + "word " * 100 + '", "keep": "perhaps"}'), answer(GOOD))
    client = StructuredClient(settings)
    if sent_again:
        assert call(client) == GOOD
        caps = [r["max_tokens"] for r in fake_openai.requests]
        assert caps[0] == 200 and MIN_ANSWER_TOKENS <= caps[1] < 200  # the re-ask's cap shrank to what is left
    else:
        with pytest.raises(LLMAnswerError) as info:
            call(client)
        assert len(fake_openai.requests) == 1 and info.value.attempts == 1
        assert problem_summary(info.value.last_error).startswith("field keep")  # the answer's own problem is kept
