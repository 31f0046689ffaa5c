"""One wrapper for structured LLM calls over any OpenAI-compatible endpoint.

``StructuredClient.call`` renders a prompt file, asks for a pydantic model
(``chat.completions.parse``: strict json_schema), re-asks with the validation error when
the answer is malformed, cut off or off-schema, and stops after ``max_tries`` with a typed
:class:`LLMAnswerError`. HTTP 429/5xx and timeouts are retried by the openai client itself
(``max_retries``); what survives them is an :class:`LLMTransportError`. Validated answers
are cached in SQLite by (content, prompt hash, model, answer schema), so a rerun over
unchanged input makes no call at all. Every call, token, hit and failure is counted in a
:class:`~testcurator.agents.brain.Usage`.

"An LLM is configured" is decided only from explicit settings: without a base URL there is
no LLM (the openai client would otherwise default to the public API).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import openai
from pydantic import BaseModel, ValidationError

from testcurator.agents.brain import Usage
from testcurator.errors import BadInputError, BrainError
from testcurator.prompts import Prompt, load_prompt

T = TypeVar("T", bound=BaseModel)
CACHE_FILE = "llm_cache.sqlite"
# The client insists on a key; local servers (vLLM, Ollama, llama.cpp) ignore it.
_NO_KEY = "not-needed"


class LLMAnswerError(BrainError):
    """The model gave no usable answer in ``attempts`` tries; ``last_error`` says why."""

    def __init__(self, prompt: str, attempts: int, last_error: Exception) -> None:
        self.prompt = prompt
        self.attempts = attempts
        self.last_error = last_error
        super().__init__(f"LLM answer to prompt {prompt!r} unusable after {attempts} tries: {last_error}")


class LLMTransportError(BrainError):
    """The endpoint did not answer (timeout, refused, HTTP error after the client's retries)."""

    def __init__(self, base_url: str, cause: Exception) -> None:
        self.base_url = base_url
        self.cause = cause
        super().__init__(f"LLM endpoint {base_url} failed: {type(cause).__name__}: {cause}")


@dataclass(frozen=True)
class LLMSettings:
    """Where and how to ask. ``max_tries`` bounds re-asks for unusable answers;
    ``max_retries`` is the openai client's own retry count for 429/5xx/timeouts."""

    base_url: str
    model: str
    api_key: str = field(default=_NO_KEY, repr=False)
    timeout: float = 120.0
    max_tries: int = 3
    max_retries: int = 2
    batch_size: int = 20
    temperature: float | None = 0.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> LLMSettings | None:
        """Settings from OPENAI_BASE_URL / OPENAI_API_KEY / TESTCURATOR_LLM_MODEL, explicit
        ``overrides`` (non-None) winning; None when no base URL is given anywhere."""
        env = os.environ if env is None else env
        given = {k: v for k, v in overrides.items() if v is not None}
        base_url = given.pop("base_url", None) or env.get("OPENAI_BASE_URL")
        if not base_url:
            return None
        model = given.pop("model", None) or env.get("TESTCURATOR_LLM_MODEL")
        if not model:
            raise BadInputError(f"LLM endpoint {base_url} given but no model: set TESTCURATOR_LLM_MODEL or llm.model")
        api_key = given.pop("api_key", None) or env.get("OPENAI_API_KEY") or _NO_KEY
        return cls(base_url=base_url, model=model, api_key=api_key, **given)

    @classmethod
    def require(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> LLMSettings:
        """As :meth:`from_env`, but a missing base URL is bad input (``--brain llm``)."""
        settings = cls.from_env(env, **overrides)
        if settings is None:
            raise BadInputError("--brain llm needs an OpenAI-compatible endpoint: set OPENAI_BASE_URL "
                                "(and TESTCURATOR_LLM_MODEL) or llm.base_url / llm.model in the config")
        return settings


@dataclass(frozen=True)
class Correction:
    """A follow-up turn: the previous answer (as sent back to the model) and its problems."""

    previous: str | None
    problems: tuple[str, ...]


class AnswerCache:
    """Validated answers by key, in SQLite (one row per key; last write wins).

    A connection per operation: brains may be driven from LangGraph worker threads.
    ``path=None`` keeps answers in memory for this process only.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._memory: dict[str, str] = {}
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)")

    def _connect(self) -> sqlite3.Connection:
        assert self.path is not None
        return sqlite3.connect(self.path, timeout=30)

    def get(self, key: str) -> str | None:
        if self.path is None:
            return self._memory.get(key)
        with self._lock, self._connect() as conn:
            row = conn.execute("SELECT value FROM answers WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def put(self, key: str, value: str) -> None:
        if self.path is None:
            self._memory[key] = value
            return
        with self._lock, self._connect() as conn:
            conn.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?)", (key, value, time.time()))


def digest(*parts: Any) -> str:
    """sha256 over a JSON rendering of ``parts`` (stable across runs and processes)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def schema_hash(model: type[BaseModel]) -> str:
    return digest(model.model_json_schema())


class StructuredClient:
    """Structured calls with re-asks, caching and accounting (see the module docstring)."""

    def __init__(self, settings: LLMSettings, state_dir: Path | None = None, usage: Usage | None = None) -> None:
        self.settings = settings
        self.usage = usage if usage is not None else Usage()
        self.cache = AnswerCache(state_dir / CACHE_FILE if state_dir is not None else None)
        self._reask = load_prompt("reask")
        self._client = openai.OpenAI(base_url=settings.base_url, api_key=settings.api_key,
                                     timeout=settings.timeout, max_retries=settings.max_retries)

    def cache_key(self, prompt: Prompt, response_model: type[BaseModel], content: str, correction: Correction | None = None) -> str:
        fix = None if correction is None else [correction.previous, list(correction.problems)]
        return digest(digest(content), prompt.hash, self.settings.model, schema_hash(response_model), fix)

    def call(self, prompt: Prompt, variables: Mapping[str, Any], response_model: type[T],
             cache_key_content: str, correction: Correction | None = None) -> T:
        """The model's answer to ``prompt`` as a validated ``response_model``.

        ``cache_key_content`` must change whenever the input that matters changes (callers
        pass the JSON of the batch). Raises LLMAnswerError / LLMTransportError.
        """
        key = self.cache_key(prompt, response_model, cache_key_content, correction)
        cached = self.cache.get(key)
        if cached is not None:
            try:
                answer = response_model.model_validate_json(cached)
            except ValidationError:
                pass  # written under an older schema: ask again
            else:
                self.usage.cache_hits += 1
                return answer
        messages = prompt.render(variables)
        if correction is not None:
            messages += self._correction_turn(correction)
        answer = self._ask(prompt, messages, response_model)
        self.cache.put(key, answer.model_dump_json())
        return answer

    def _correction_turn(self, correction: Correction) -> list[dict[str, str]]:
        turn = [{"role": "assistant", "content": correction.previous}] if correction.previous else []
        user = self._reask.render({"problems": "\n".join(f"- {p}" for p in correction.problems)})[1]
        return turn + [user]

    def _ask(self, prompt: Prompt, messages: list[dict[str, str]], response_model: type[T]) -> T:
        last_error: Exception | None = None
        for attempt in range(1, self.settings.max_tries + 1):
            if attempt > 1:
                self.usage.reasks += 1
            content, answer, error = self._one_call(messages, response_model)
            if answer is not None:
                return answer
            assert error is not None
            last_error = error
            self.usage.failures += 1
            # Show the model its own words and what was wrong with them.
            if content:
                messages = messages + [{"role": "assistant", "content": content}]
            problems = _problem_lines(error)
            messages = messages + [self._reask.render({"problems": problems})[1]]
        assert last_error is not None
        raise LLMAnswerError(prompt.name, self.settings.max_tries, last_error)

    def _one_call(self, messages: list[dict[str, str]], response_model: type[T]) -> tuple[str | None, T | None, Exception | None]:
        """(raw content, parsed answer or None, error or None) of one request."""
        kwargs: dict[str, Any] = {"model": self.settings.model, "messages": messages, "response_format": response_model}
        if self.settings.temperature is not None:
            kwargs["temperature"] = self.settings.temperature
        try:
            raw = self._client.chat.completions.with_raw_response.parse(**kwargs)
        except (openai.APITimeoutError, openai.APIConnectionError, openai.APIStatusError) as exc:
            self.usage.failures += 1
            raise LLMTransportError(self.settings.base_url, exc) from exc
        self.usage.calls += 1
        content = self._account(raw.http_response)
        try:
            completion = raw.parse()
        except (ValidationError, openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError) as exc:
            return content, None, exc
        message = completion.choices[0].message
        if message.parsed is None:
            return content, None, BrainError(f"model refused: {message.refusal or 'no content'}")
        return content, message.parsed, None

    def _account(self, response: Any) -> str | None:
        """Count tokens from the raw body (also for answers that will not parse)."""
        try:
            body = json.loads(response.text)
        except ValueError:
            return None
        usage = body.get("usage") or {}
        self.usage.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        self.usage.completion_tokens += int(usage.get("completion_tokens") or 0)
        choices = body.get("choices") or [{}]
        content = (choices[0].get("message") or {}).get("content")
        return content if isinstance(content, str) else None


def _problem_lines(error: Exception) -> str:
    if isinstance(error, ValidationError):
        return "\n".join(f"- {'.'.join(str(p) for p in e['loc']) or '(answer)'}: {e['msg']}" for e in error.errors())
    if isinstance(error, openai.LengthFinishReasonError):
        return "- the answer was cut off at the token limit: be more concise (shorter reasoning)"
    return f"- {error}"
