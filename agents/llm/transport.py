"""One chat request to an OpenAI-compatible endpoint, however the endpoint behaves.

* Answers are streamed (``stream=True``): a request that is producing tokens, or that the
  server keeps alive while it reads the prompt or waits its turn (llama-cpp-python's server
  sends a ping every 15 s), is never abandoned. The one timeout is an idle one: no byte for
  ``idle_timeout`` seconds. There is no total timeout.
* The structured-output mode comes from the :class:`~testcurator.agents.llm.negotiate.Negotiator`;
  a shape rejection steps it down and the request is sent again in the next mode.
* Refused connections and 408/409/429/5xx answers that are not shape rejections are retried
  ``max_retries`` times with exponential backoff from ``retry_backoff`` seconds (or the
  server's Retry-After): the server is not working on them. An idle timeout is never re-sent:
  the server may still be working on the request, and llama.cpp's servers answer one request
  at a time, so a re-send would only queue behind it. Nothing at all within the idle timeout
  (no first token, no keep-alive) means the endpoint is *down* at once; other failures make it
  down after :data:`DOWN_AFTER` in a row. Once down, every later request fails at once,
  without touching the network.
* The time budget (:class:`~testcurator.agents.llm.budget.Pace`): a request is sent only while
  its expected time, at the rates measured on the answers so far, fits in what is left of
  ``budget_s``; otherwise :class:`LLMBudgetError`. A request in flight always finishes.
* At most ``concurrency`` requests are in flight, each with the caller's output-token cap.
  Calls, seconds and tokens are counted as they happen.
"""

from __future__ import annotations

import importlib
import json
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import openai
from pydantic import BaseModel

from testcurator.agents.llm.budget import Pace, TokenEstimator
from testcurator.agents.llm.cache import AuditLog
from testcurator.agents.llm.negotiate import Narrow, Negotiator, is_shape_error, response_format, with_schema_in_prompt
from testcurator.errors import BrainError

if TYPE_CHECKING:
    from testcurator.config.llm import LLMSettings

def _http_errors(name: str) -> tuple[type[Exception], ...]:
    """The class ``name`` of the HTTP library the installed openai client sends with.

    openai 1.x and 2.x send with httpx, 3.x with httpx2 (``openai.DefaultHttpxClient`` derives
    from that library's Client). An error raised while a stream is read may reach us unwrapped,
    as that library's class, which an ``except httpx.TransportError`` misses under openai 3.
    """
    client = next(c for c in openai.DefaultHttpxClient.__mro__ if c.__name__ == "Client")
    library = importlib.import_module(client.__module__.split(".")[0])
    return (getattr(library, name),)


_DROPPED = (openai.APIConnectionError, *_http_errors("TransportError"))
_IDLE = (openai.APITimeoutError, *_http_errors("TimeoutException"))
DOWN_AFTER = 2  # failed requests in a row (each retried with backoff) before the endpoint is down
_RETRY_STATUSES = frozenset({408, 409, 429})


class LLMTransportError(BrainError):
    """The endpoint did not answer (refused, timeout, HTTP error after our retries), or is down."""

    def __init__(self, base_url: str, cause: Exception | None, down: bool = False) -> None:
        self.base_url = base_url
        self.cause = cause
        self.down = down
        super().__init__(f"LLM endpoint {base_url} {'is down' if down else 'failed'}: {type(cause).__name__}: {cause}")

    @property
    def kind(self) -> str:
        """The fault in a few words (class and HTTP status), for one-line reasons."""
        status = getattr(self.cause, "status_code", None)
        return f"{type(self.cause).__name__} (HTTP {status})" if status else type(self.cause).__name__


class LLMBudgetError(BrainError):
    """The run's time budget for the LLM is spent: the request was not sent."""

    def __init__(self, budget_s: float, spent_s: float) -> None:
        self.budget_s = budget_s
        self.spent_s = spent_s
        super().__init__(f"the LLM's time budget ({budget_s:g} s) was spent ({spent_s:.1f} s used)")


class _Idle(Exception):
    """Nothing arrived for the idle timeout; ``answering``: after the first token."""

    def __init__(self, answering: bool, cause: Exception) -> None:
        self.answering = answering
        self.cause = cause
        super().__init__(str(cause))


class _Answer:
    """One streamed answer: its text, finish reason and token counts."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.finish: str | None = None
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.chunks = 0
        self.first_token_at: float | None = None
        self.sent_at = time.monotonic()

    @property
    def content(self) -> str | None:
        return "".join(self.parts) if self.parts else None


class Transport:
    """Sends chat requests (see the module docstring); ``count`` receives usage deltas."""

    def __init__(self, settings: LLMSettings, count: Callable[..., None], audit: AuditLog) -> None:
        self.settings = settings
        self.count = count
        self.audit = audit
        self.negotiator = Negotiator(start=settings.structured_output)
        self.tokens = TokenEstimator()
        self.pace = Pace(budget_s=settings.budget_s or None)
        self.down: str | None = None  # why the endpoint was declared down, once it is
        self._failed_in_row = 0
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max(1, settings.concurrency))
        self._usage_chunk = True  # ask for the usage chunk until the server refuses the option
        idle = settings.idle_timeout
        # Retries are ours (they must tell a shape rejection from a fault): none in the client.
        # The read timeout is the idle timeout: it runs between two bytes, never over a whole answer.
        self._client = openai.OpenAI(base_url=settings.base_url, api_key=settings.api_key, max_retries=0,
                                     timeout=openai.Timeout(idle, connect=min(idle, 10.0)))

    @property
    def mode(self) -> str:
        return self.negotiator.mode(self.settings.base_url)

    def request(self, messages: list[dict[str, str]], model: type[BaseModel], max_tokens: int,
                narrow: Narrow | None = None) -> tuple[str, str | None, str | None]:
        """(mode used, content, finish reason) of one answered request."""
        if self.down:
            raise LLMTransportError(self.settings.base_url, ConnectionError(self.down), down=True)
        with self._slots:
            while True:
                mode = self.mode
                sent = with_schema_in_prompt(mode, messages, model, narrow)
                kwargs: dict[str, Any] = {"model": self.settings.model, "messages": sent, "max_tokens": max_tokens}
                fmt = response_format(mode, model, narrow)
                if fmt is not None:
                    kwargs["response_format"] = fmt
                if self.settings.temperature is not None:
                    kwargs["temperature"] = self.settings.temperature
                chars = sum(len(m["content"]) for m in sent)
                estimated = self.tokens.estimate_chars(chars)
                answer = self._send(kwargs, mode, estimated)
                if answer is not None:
                    self.count(estimated_prompt_tokens=estimated)
                    self._account(answer, chars)
                    return mode, answer.content, answer.finish

    def _send(self, kwargs: dict[str, Any], mode: str, prompt_tokens: int) -> _Answer | None:
        """The streamed answer, or None after a shape rejection stepped the mode down."""
        error: Exception | None = None
        for attempt in range(self.settings.max_retries + 1):
            if attempt:
                self.count(transport_retries=1)
                time.sleep(self._backoff(attempt, error))
            start = time.monotonic()
            if not self.pace.admits(prompt_tokens, kwargs["max_tokens"], start):
                raise LLMBudgetError(self.pace.budget_s or 0.0, self.pace.spent_s(start))
            self.pace.start(start)
            try:
                answer = self._stream(kwargs)
            except _Idle as idle:
                self.count(failures=1)
                self._idle(idle)  # this request was asked: its error is its own, later ones are "down"
                raise LLMTransportError(self.settings.base_url, idle.cause) from idle.cause
            except openai.APIStatusError as exc:
                error = exc
                message = error_message(exc)
                if is_shape_error(exc.status_code, message):
                    return self._step_down(exc, mode, message)
                if exc.status_code not in _RETRY_STATUSES and exc.status_code < 500:
                    if self._usage_chunk and "stream_options" in message:
                        self._usage_chunk = False  # a server that knows no stream_options: count chunks
                        continue
                    self.count(failures=1)
                    self._failed(exc)  # 400 (too long), 401, 404 (no such model): retrying will not help
                    raise LLMTransportError(self.settings.base_url, exc) from exc
            except _DROPPED as exc:
                error = exc  # refused, or dropped mid-answer: the server is not working on it
            else:
                self.count(calls=1, latency_s=time.monotonic() - start)
                with self._lock:
                    self._failed_in_row = 0
                return answer
            finally:
                self.pace.stop(time.monotonic())
        assert error is not None
        self.count(failures=1)
        self._failed(error)
        raise LLMTransportError(self.settings.base_url, error, down=bool(self.down)) from error

    def _stream(self, kwargs: dict[str, Any]) -> _Answer:
        """Read one streamed answer to its end; an idle timeout is :class:`_Idle`."""
        answer = _Answer()
        options = {"stream_options": {"include_usage": True}} if self._usage_chunk else {}
        try:
            stream = self._client.chat.completions.create(**kwargs, stream=True, **options)
            with stream:
                for chunk in stream:
                    self._take(answer, chunk)
        except _IDLE as exc:
            raise _Idle(answer.first_token_at is not None, exc) from exc
        return answer

    @staticmethod
    def _take(answer: _Answer, chunk: Any) -> None:
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            answer.prompt_tokens = int(usage.prompt_tokens or 0)
            answer.completion_tokens = int(usage.completion_tokens or 0)
        for choice in chunk.choices or []:
            text = getattr(choice.delta, "content", None) if choice.delta is not None else None
            if text:
                if answer.first_token_at is None:
                    answer.first_token_at = time.monotonic()
                answer.parts.append(text)
                answer.chunks += 1
            if choice.finish_reason:
                answer.finish = choice.finish_reason

    def _idle(self, idle: _Idle) -> None:
        """An idle timeout: the request is not re-sent (see the module docstring)."""
        if idle.answering:
            self._failed(idle.cause)
            return
        with self._lock:
            if self.down:
                return
            self.down = f"nothing within the idle timeout ({self.settings.idle_timeout:.0f} s) of a request"
        sys.stderr.write(f"warning: LLM endpoint {self.settings.base_url} is down ({self.down}); "
                         "the offline brain decides the rest of this run\n")

    def _step_down(self, exc: openai.APIStatusError, mode: str, message: str) -> None:
        if self.negotiator.step_down(self.settings.base_url, mode, f"HTTP {exc.status_code}: {message}") is None:
            raise LLMTransportError(self.settings.base_url, exc) from exc
        self.count(downshifts=1)
        self.audit.write(kind="format_rejected", model=self.settings.model, mode=mode,
                         problem=f"HTTP {exc.status_code}", raw=message)
        return None

    def _backoff(self, attempt: int, error: Exception | None) -> float:
        headers = getattr(getattr(error, "response", None), "headers", None) or {}
        try:
            if "retry-after-ms" in headers:
                return min(30.0, float(headers["retry-after-ms"]) / 1000)
            if "retry-after" in headers:
                return min(30.0, float(headers["retry-after"]))
        except ValueError:
            pass
        return min(30.0, self.settings.retry_backoff * 2 ** (attempt - 1))

    def _failed(self, error: Exception) -> None:
        with self._lock:
            self._failed_in_row += 1
            if self._failed_in_row < DOWN_AFTER or self.down:
                return
            self.down = (f"{type(error).__name__} on {DOWN_AFTER} requests in a row, "
                         f"each retried {self.settings.max_retries} time(s)")
        sys.stderr.write(f"warning: LLM endpoint {self.settings.base_url} is down ({self.down}); "
                         "the offline brain decides the rest of this run\n")

    def _account(self, answer: _Answer, prompt_chars: int) -> None:
        """Tokens of one answer counted (the server's usage chunk, else one token per chunk),
        and the endpoint's rates learnt from it."""
        if answer.prompt_tokens:
            self.tokens.observe(prompt_chars, answer.prompt_tokens)
        completion = answer.completion_tokens or answer.chunks
        self.count(prompt_tokens=answer.prompt_tokens, completion_tokens=completion)
        if answer.first_token_at is not None:
            done = time.monotonic()
            prompt = answer.prompt_tokens or self.tokens.estimate_chars(prompt_chars)
            # Time to the first token is the prompt's; the rest is generation.
            self.pace.observe(prompt, answer.first_token_at - answer.sent_at, completion,
                              done - answer.first_token_at)


def error_message(exc: openai.APIStatusError) -> str:
    """The server's own message of an HTTP error (servers nest it differently)."""
    body = exc.body
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, Mapping) else inner
        if message:
            return message if isinstance(message, str) else json.dumps(message)
        return json.dumps(body)
    return str(body or exc.message)
