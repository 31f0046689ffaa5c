"""One chat request to an OpenAI-compatible endpoint, however the endpoint behaves.

* The structured-output mode comes from the :class:`~testcurator.agents.llm_negotiate.Negotiator`;
  a shape rejection steps it down and the request is sent again in the next mode.
* Transport faults (refused, timeout, 408/409/429/5xx that are not shape rejections) are
  retried ``max_retries`` times with exponential backoff from ``retry_backoff`` seconds (or
  the server's Retry-After). What still fails is an :class:`LLMTransportError`; after
  :data:`DOWN_AFTER` failed requests in a row the endpoint is *down* for the rest of the run
  and every later request fails at once, without touching the network.
* At most ``concurrency`` requests are in flight; each has the settings' timeout and the
  caller's output-token cap. Calls, seconds and tokens are counted as they happen.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import openai
from pydantic import BaseModel

from testcurator.agents.llm_budget import TokenEstimator
from testcurator.agents.llm_cache import AuditLog
from testcurator.agents.llm_negotiate import Narrow, Negotiator, is_shape_error, response_format, with_schema_in_prompt
from testcurator.errors import BrainError

if TYPE_CHECKING:
    from testcurator.agents.llm_client import LLMSettings

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


class Transport:
    """Sends chat requests (see the module docstring); ``count`` receives usage deltas."""

    def __init__(self, settings: LLMSettings, count: Callable[..., None], audit: AuditLog) -> None:
        self.settings = settings
        self.count = count
        self.audit = audit
        self.negotiator = Negotiator(start=settings.structured_output)
        self.tokens = TokenEstimator()
        self.down: str | None = None  # why the endpoint was declared down, once it is
        self._failed_in_row = 0
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max(1, settings.concurrency))
        # Retries are ours (they must tell a shape rejection from a fault): none in the client.
        self._client = openai.OpenAI(base_url=settings.base_url, api_key=settings.api_key,
                                     timeout=settings.timeout, max_retries=0)

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
                kwargs: dict[str, Any] = {"model": self.settings.model, "messages": sent, "max_tokens": max_tokens,
                                          "timeout": self.settings.timeout}
                fmt = response_format(mode, model, narrow)
                if fmt is not None:
                    kwargs["response_format"] = fmt
                if self.settings.temperature is not None:
                    kwargs["temperature"] = self.settings.temperature
                raw = self._send(kwargs, mode)
                if raw is not None:
                    chars = sum(len(m["content"]) for m in sent)
                    self.count(estimated_prompt_tokens=self.tokens.estimate_chars(chars))
                    return (mode, *self._account(raw, chars))

    def _send(self, kwargs: dict[str, Any], mode: str) -> Any | None:
        """The raw HTTP response, or None after a shape rejection stepped the mode down."""
        error: Exception | None = None
        for attempt in range(self.settings.max_retries + 1):
            if attempt:
                self.count(transport_retries=1)
                time.sleep(self._backoff(attempt, error))
            start = time.perf_counter()
            try:
                raw = self._client.chat.completions.with_raw_response.create(**kwargs)
            except openai.APIStatusError as exc:
                error = exc
                message = error_message(exc)
                if is_shape_error(exc.status_code, message):
                    return self._step_down(exc, mode, message)
                if exc.status_code not in _RETRY_STATUSES and exc.status_code < 500:
                    self.count(failures=1)
                    self._failed(exc)  # 400 (too long), 401, 404 (no such model): retrying will not help
                    raise LLMTransportError(self.settings.base_url, exc) from exc
            except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                error = exc
            else:
                self.count(calls=1, latency_s=time.perf_counter() - start)
                with self._lock:
                    self._failed_in_row = 0
                return raw
        assert error is not None
        self.count(failures=1)
        self._failed(error)
        raise LLMTransportError(self.settings.base_url, error, down=bool(self.down)) from error

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

    def _account(self, raw: Any, prompt_chars: int) -> tuple[str | None, str | None]:
        """(content, finish reason) from the raw body; tokens counted for any answer."""
        try:
            body = json.loads(raw.http_response.text)
        except ValueError:
            return None, None
        usage = body.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        self.tokens.observe(prompt_chars, prompt_tokens)
        self.count(prompt_tokens=prompt_tokens, completion_tokens=int(usage.get("completion_tokens") or 0))
        choice = (body.get("choices") or [{}])[0]
        content = (choice.get("message") or {}).get("content")
        return (content if isinstance(content, str) else None), choice.get("finish_reason")


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
