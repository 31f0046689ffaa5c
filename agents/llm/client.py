"""One wrapper for structured LLM calls over any OpenAI-compatible endpoint.

``StructuredClient.call`` renders a prompt file and asks for a pydantic model in the
structured-output mode the endpoint accepts (agents/llm/negotiate.py: json_schema, then
JSON mode with the schema, then plain text; a request-shape rejection steps down and is
remembered per endpoint for the client's life). Every answer is validated by pydantic and
re-asked with the error, at most ``max_tries`` times, then a typed :class:`LLMAnswerError`.

Answers are streamed by agents/llm/transport.py, which retries refused connections and HTTP
errors with backoff, never re-sends a request the server may still be working on, and keeps
the run's time budget; what survives is an
:class:`~testcurator.agents.llm.transport.LLMTransportError` (an endpoint that keeps failing
is declared down for the run: every later call fails at once) or an
:class:`~testcurator.agents.llm.transport.LLMBudgetError`; the brain's fallback decides
those, the report says why. Calls run at most ``concurrency`` at a time, each with an idle
timeout and an output-token cap.

Validated answers are cached in SQLite by (content, prompt hash, model, answer schema), so a
rerun over unchanged input makes no call. Unusable answers go, with the model's raw text, to
the audit log (``<state dir>/llm_audit.jsonl``) and nowhere else. Every call, token, second,
hit and failure is counted in a :class:`~testcurator.agents.brain.Usage`.

"An LLM is configured" is decided only from explicit settings: without a base URL there is
no LLM (the openai client would otherwise default to the public API).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from testcurator.agents.brain import Usage
from testcurator.agents.llm.budget import MARGIN_TOKENS, discover_context
from testcurator.agents.llm.cache import AnswerCache, AuditLog, digest, schema_hash
from testcurator.agents.llm.negotiate import Narrow, complete_items, one_line, parse_answer, with_schema_in_prompt
from testcurator.agents.llm.transport import Transport
from testcurator.config.llm import LLMSettings
from testcurator.errors import BrainError
from testcurator.prompts import Prompt, load_prompt

T = TypeVar("T", bound=BaseModel)
CACHE_FILE = "llm_cache.sqlite"
AUDIT_FILE = "llm_audit.jsonl"
MIN_ANSWER_TOKENS = 64  # below this a re-ask cannot hold one decision: it is not sent


class LLMAnswerError(BrainError):
    """The model gave no usable answer in ``attempts`` tries; ``last_error`` says why."""

    def __init__(self, prompt: str, attempts: int, last_error: Exception) -> None:
        self.prompt = prompt
        self.attempts = attempts
        self.last_error = last_error
        super().__init__(f"LLM answer to prompt {prompt!r} unusable after {attempts} tries: {problem_summary(last_error)}")


class Correction:
    """A follow-up turn: the previous answer (as sent back to the model) and its problems."""

    def __init__(self, previous: str | None, problems: tuple[str, ...]) -> None:
        self.previous = previous
        self.problems = problems


class StructuredClient:
    """Structured calls with negotiation, re-asks, caching and accounting (module docstring)."""

    def __init__(self, settings: LLMSettings, state_dir: Path | None = None, usage: Usage | None = None) -> None:
        self.settings = settings
        self.usage = usage if usage is not None else Usage()
        self.cache = AnswerCache(state_dir / CACHE_FILE if state_dir is not None else None)
        self.audit = AuditLog(state_dir / AUDIT_FILE if state_dir is not None else None)
        self._lock = threading.Lock()
        self.transport = Transport(settings, self.count, self.audit)
        self._context: tuple[int, str] | None = None
        self._reask = load_prompt("reask")

    # -- accounting --------------------------------------------------------------------
    def count(self, **deltas: float) -> None:
        """Add to usage counters (thread-safe: batches may run concurrently)."""
        with self._lock:
            for name, delta in deltas.items():
                setattr(self.usage, name, getattr(self.usage, name) + delta)

    @property
    def mode(self) -> str:
        """The structured-output mode this endpoint settled on (so far)."""
        return self.transport.mode

    @property
    def down(self) -> str | None:
        """Why the endpoint was declared down (None while it answers)."""
        return self.transport.down

    def context_window(self) -> tuple[int, str]:
        """(tokens, source): what the server says, else ``llm.context_tokens``."""
        if self._context is None:
            found, source = (None, "not asked: the endpoint is down") if self.down else discover_context(
                self.settings.base_url, self.settings.model, self.settings.api_key, min(10.0, self.settings.idle_timeout))
            if found:
                self._context = (found, f"server ({source})")
            else:
                self._context = (self.settings.context_tokens, f"llm.context_tokens ({source})")
        return self._context

    def status(self) -> dict[str, Any]:
        """The endpoint as the report shows it."""
        window, source = self._context or (self.settings.context_tokens, "not asked")
        return {"endpoint": self.settings.base_url, "model": self.settings.model, "mode": self.mode,
                "negotiation": list(self.transport.negotiator.steps), "down": self.down, "context_tokens": window,
                "context_source": source, "max_output_tokens": self.settings.max_output_tokens,
                "concurrency": self.settings.concurrency, "idle_timeout_s": self.settings.idle_timeout,
                "budget_s": self.settings.budget_s or None, "budget_spent_s": round(self.transport.pace.spent_s(time.monotonic()), 1),
                "tokens_per_s": _rounded(self.transport.pace.tokens_per_s),
                "prompt_tokens_per_s": _rounded(self.transport.pace.prompt_tokens_per_s),
                "audit_log": str(self.audit.path) if self.audit.path else None, "audit_records": self.audit.written}

    # -- calls ---------------------------------------------------------------------------
    def cache_key(self, prompt: Prompt, response_model: type[BaseModel], content: str, correction: Correction | None = None) -> str:
        fix = None if correction is None else [correction.previous, list(correction.problems)]
        return digest(digest(content), prompt.hash, self.settings.model, schema_hash(response_model), fix)

    def call(self, prompt: Prompt, variables: Mapping[str, Any], response_model: type[T],
             cache_key_content: str, correction: Correction | None = None, *, max_tokens: int | None = None,
             narrow: Narrow | None = None) -> T:
        """The model's answer to ``prompt`` as a validated ``response_model``.

        ``cache_key_content`` must change whenever the input that matters changes (callers
        pass the JSON of the batch); ``narrow`` pins the answer's names to the batch's.
        Raises LLMAnswerError / LLMTransportError.
        """
        key = self.cache_key(prompt, response_model, cache_key_content, correction)
        cached = self.cache.get(key)
        if cached is not None:
            try:
                answer = response_model.model_validate_json(cached)
            except ValidationError:
                pass  # written under an older schema: ask again
            else:
                self.count(cache_hits=1)
                return answer
        messages = prompt.render(variables)
        if correction is not None:
            messages += self._correction_turn(correction)
        answer = self._ask(prompt, messages, response_model, max_tokens or self.settings.max_output_tokens, narrow)
        self.cache.put(key, answer.model_dump_json())
        return answer

    def _complete_items(self, prompt: Prompt, mode: str, content: str, response_model: type[T],
                        narrow: Narrow | None) -> T:
        """An answer cut off at the output cap, as far as its items are complete (the caller's
        rails find the rest missing and ask for it); :class:`_CutOff` when none is."""
        partial = complete_items(content)
        if partial is None:
            raise _CutOff()
        try:
            answer = parse_answer("json_object", partial, response_model, narrow)
        except ValidationError:
            raise _CutOff() from None
        self.audit.write(kind="cut_off_kept", prompt=prompt.name, model=self.settings.model, mode=mode,
                         problem="answer cut off at the output-token cap; its complete items kept", raw=content)
        return answer

    def _correction_turn(self, correction: Correction) -> list[dict[str, str]]:
        turn = [{"role": "assistant", "content": correction.previous}] if correction.previous else []
        user = self._reask.render({"problems": "\n".join(f"- {p}" for p in correction.problems)})[1]
        return turn + [user]

    def _ask(self, prompt: Prompt, messages: list[dict[str, str]], response_model: type[T], max_tokens: int,
             narrow: Narrow | None) -> T:
        last_error: Exception | None = None
        for attempt in range(1, self.settings.max_tries + 1):
            if attempt > 1:
                self.count(reasks=1)
            # Each re-ask carries the answer before it: the conversation grows by up to an
            # answer's cap a turn, and a server refuses a prompt plus cap over its window
            # (llama-cpp-python: "Requested tokens (8262) exceed context window of 8192").
            room = self._room(messages, response_model, narrow)
            if room < min(max_tokens, MIN_ANSWER_TOKENS):
                raise LLMAnswerError(prompt.name, attempt - 1, last_error or _NoRoom())
            mode, content, finish = self.transport.request(messages, response_model, min(max_tokens, room), narrow)
            try:
                if finish == "length":
                    return self._complete_items(prompt, mode, content or "", response_model, narrow)
                return parse_answer(mode, content or "", response_model, narrow)
            except (ValidationError, _CutOff) as exc:
                last_error = exc
            self.count(failures=1)
            self.audit.write(kind="invalid_answer", prompt=prompt.name, model=self.settings.model, mode=mode,
                             attempt=attempt, problem=problem_summary(last_error), raw=content)
            # Show the model its own words and what was wrong with them.
            if content:
                messages = messages + [{"role": "assistant", "content": content}]
            messages = messages + [self._reask.render({"problems": _problem_lines(last_error)})[1]]
        assert last_error is not None
        raise LLMAnswerError(prompt.name, self.settings.max_tries, last_error)

    def _room(self, messages: list[dict[str, str]], response_model: type[BaseModel], narrow: Narrow | None) -> int:
        """Output tokens the model's window leaves after ``messages`` as they will be sent."""
        window, _ = self.context_window()
        sent = with_schema_in_prompt(self.mode, messages, response_model, narrow)
        return window - sum(self.transport.tokens.estimate(m["content"]) for m in sent) - MARGIN_TOKENS


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


class _CutOff(Exception):
    """The answer stopped at the output-token cap."""


class _NoRoom(Exception):
    """The conversation left no room in the model's window for an answer."""


def problem_summary(error: Exception) -> str:
    """One line naming which field or rule failed, never the model's text."""
    if isinstance(error, ValidationError):
        errors = error.errors(include_url=False, include_input=False, include_context=False)
        first = errors[0]
        where = ".".join(str(p) for p in first["loc"]) or "(answer)"
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        return f"field {where}: {first['type']}{more}"
    if isinstance(error, _CutOff):
        return "answer cut off at the output-token cap"
    if isinstance(error, _NoRoom):
        return "no room left in the model's context window for an answer"
    return one_line(type(error).__name__)


def _problem_lines(error: Exception) -> str:
    """What the model is told when re-asked (its own field errors, no URLs)."""
    if isinstance(error, ValidationError):
        return "\n".join(f"- {'.'.join(str(p) for p in e['loc']) or '(answer)'}: {e['msg']}"
                         for e in error.errors(include_url=False)[:20])
    if isinstance(error, _CutOff):
        return "- the answer was cut off at the token limit: be more concise (shorter reasoning)"
    return f"- {error}"
