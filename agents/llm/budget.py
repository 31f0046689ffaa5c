"""Context and cost: how many tokens a request takes, how big the model's window is, and
which items go into one batch.

* :class:`TokenEstimator` guesses tokens from characters (no tokenizer download): three
  characters per token to start (JSON and code tokenize densely), then the densest ratio the
  server has reported (``usage.prompt_tokens``), so estimates stay on the safe side.
* :func:`discover_context` asks the server how large the window is: vLLM's
  ``/v1/models`` (``max_model_len``), llama.cpp's ``/v1/models`` ``meta`` and ``/props``,
  llama-cpp-python's ``/v1/models`` (``n_ctx`` where it reports one) and others'
  ``context_length``; None when the server does not say (then ``llm.context_tokens``).
* :func:`plan_batches` packs items in order so that the fixed part of the prompt, the
  items, and the answer's output-token cap fit the window, with at most ``max_items``.
* :class:`Pace` is time: the endpoint's prompt and generation speed measured on the answers
  so far, and the run's time budget (what a request is expected to take, whether it may be
  sent, how long answers and how many items per batch the rest of the budget pays for).
* :class:`StageProgress` is the progress line of one stage's questions.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from testcurator.runner.ticker import duration

T = TypeVar("T")
# Room for the chat template's own tokens and the estimate's error.
MARGIN_TOKENS = 256
_CONTEXT_KEYS = ("max_model_len", "context_length", "context_window", "max_context_length", "n_ctx", "n_ctx_train")


@dataclass
class TokenEstimator:
    """Characters-per-token estimate, tightened by what the server reports."""

    chars_per_token: float = 3.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def estimate(self, text: str) -> int:
        return self.estimate_chars(len(text))

    def estimate_chars(self, chars: int) -> int:
        return math.ceil(chars / self.chars_per_token) if chars > 0 else 0

    def observe(self, chars: int, tokens: int) -> None:
        """Learn from one request: ``chars`` of prompt took ``tokens`` tokens."""
        if tokens > 0 and chars > 0:
            with self._lock:
                self.chars_per_token = max(1.0, min(self.chars_per_token, chars / tokens))


@dataclass(frozen=True)
class Batch:
    """Indices into the items, and the output-token cap for their answer."""

    indices: tuple[int, ...]
    prompt_tokens: int
    max_tokens: int


@dataclass(frozen=True)
class Plan:
    batches: tuple[Batch, ...]
    too_large: tuple[int, ...]  # items that do not fit the window even alone
    budget: int  # the window they were planned for


def output_cap(n_items: int, per_item: int, cap: int) -> int:
    """Output tokens to allow an answer of ``n_items`` items."""
    return max(64, min(cap, per_item * n_items + 64))


def plan_batches(fixed_tokens: int, item_tokens: Sequence[int], *, context_tokens: int, max_items: int,
                 output_per_item: int, max_output_tokens: int) -> Plan:
    """Greedy, order-keeping packing (see the module docstring)."""
    batches: list[Batch] = []
    too_large: list[int] = []
    current: list[int] = []
    used = fixed_tokens

    def fits(n: int, tokens: int) -> bool:
        return tokens + output_cap(n, output_per_item, max_output_tokens) + MARGIN_TOKENS <= context_tokens

    def close() -> None:
        if current:
            batches.append(Batch(tuple(current), used, output_cap(len(current), output_per_item, max_output_tokens)))

    for index, tokens in enumerate(item_tokens):
        if not fits(1, fixed_tokens + tokens):
            too_large.append(index)
            continue
        if current and (len(current) >= max(1, max_items) or not fits(len(current) + 1, used + tokens)
                        or output_per_item * (len(current) + 1) > max_output_tokens):
            close()
            current, used = [], fixed_tokens
        current.append(index)
        used += tokens
    close()
    return Plan(tuple(batches), tuple(too_large), context_tokens)


def _context_in(data: Any) -> int | None:
    if not isinstance(data, Mapping):
        return None
    for key in _CONTEXT_KEYS:
        value = data.get(key)
        if isinstance(value, int) and value > 0:
            return value
    for nested in ("meta", "default_generation_settings", "metadata", "model_info"):
        found = _context_in(data.get(nested))
        if found:
            return found
    return None


def discover_context(base_url: str, model: str, api_key: str, timeout: float = 10.0) -> tuple[int | None, str]:
    """(window in tokens, where it came from) as the server states it; (None, why not)."""
    headers = {"Authorization": f"Bearer {api_key}"}
    base = base_url.rstrip("/")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    try:
        with httpx.Client(timeout=timeout, headers=headers) as http:
            listed = http.get(f"{base}/models")
            if listed.status_code == 200:
                entries = (listed.json() or {}).get("data") or []
                mine = [e for e in entries if isinstance(e, Mapping) and e.get("id") == model] or entries[:1]
                for entry in mine:
                    found = _context_in(entry)
                    if found:
                        return found, f"{base}/models"
            props = http.get(f"{root}/props")
            if props.status_code == 200:
                found = _context_in(props.json())
                if found:
                    return found, f"{root}/props"
    except (httpx.HTTPError, ValueError) as exc:
        return None, f"the server did not answer ({type(exc).__name__})"
    return None, "the server does not report it"


# The first answer of a run measures the endpoint: one item, so that a slow server answers it
# in seconds-to-minutes, not in the hour a full batch at 1 token/s would take.
MIN_OUTPUT_PER_ITEM = 96  # one decision's JSON (name, mode, a short reasoning, evidence) fits
# Under a budget, a batch's answer is planned to take about this long at the measured rate: on
# a slow endpoint batches are small, so the budget is spent in small steps and none is refused
# whole while a smaller one would still have fitted.
BATCH_S = 120.0


@dataclass
class Pace:
    """How fast the endpoint works, and the run's time budget for it (``budget_s``; None:
    no budget).

    Rates are cumulative over the answers so far: prompt tokens per second up to the first
    token, completion tokens per second after it. Spent time is wall time with at least one
    request in flight (concurrent requests do not count twice)."""

    budget_s: float | None = None
    prompt_tokens: int = 0
    prompt_s: float = 0.0
    completion_tokens: int = 0
    completion_s: float = 0.0
    _in_flight: int = 0
    _busy_since: float = 0.0
    _spent: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def measured(self) -> bool:
        return self.completion_tokens > 0 and self.completion_s > 0

    @property
    def tokens_per_s(self) -> float | None:
        return self.completion_tokens / self.completion_s if self.measured else None

    @property
    def prompt_tokens_per_s(self) -> float | None:
        return self.prompt_tokens / self.prompt_s if self.prompt_tokens and self.prompt_s > 0 else None

    def observe(self, prompt_tokens: int, first_token_s: float, completion_tokens: int, generation_s: float) -> None:
        with self._lock:
            if prompt_tokens > 0 and first_token_s > 0:
                self.prompt_tokens += prompt_tokens
                self.prompt_s += first_token_s
            if completion_tokens > 1 and generation_s > 0:
                self.completion_tokens += completion_tokens
                self.completion_s += generation_s

    def start(self, clock: float) -> None:
        with self._lock:
            if self._in_flight == 0:
                self._busy_since = clock
            self._in_flight += 1

    def stop(self, clock: float) -> None:
        with self._lock:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._spent += clock - self._busy_since

    def spent_s(self, clock: float) -> float:
        with self._lock:
            return self._spent + (clock - self._busy_since if self._in_flight else 0.0)

    def left_s(self, clock: float) -> float | None:
        return None if self.budget_s is None else max(0.0, self.budget_s - self.spent_s(clock))

    def estimate_s(self, prompt_tokens: int, max_tokens: int) -> float | None:
        """Seconds one request of ``prompt_tokens`` with an answer of up to ``max_tokens``
        is expected to take (None before the first answer)."""
        rate = self.tokens_per_s
        if rate is None:
            return None
        prompt_rate = self.prompt_tokens_per_s
        return (prompt_tokens / prompt_rate if prompt_rate else 0.0) + max_tokens / rate

    def admits(self, prompt_tokens: int, max_tokens: int, clock: float, share: float = 1.0) -> bool:
        """Whether a request may still be sent: some of ``share`` of the budget is left and,
        once the rate is known, the request's expected time fits in it (an answer cut off by
        the budget would be worth nothing, and a request in flight is never abandoned)."""
        if self.budget_s is None:
            return True
        left = share * self.budget_s - self.spent_s(clock)
        if left <= 0:
            return False
        expected = self.estimate_s(prompt_tokens, max_tokens)
        return expected is None or expected <= left

    def measuring_first(self, items: Sequence[T]) -> tuple[Sequence[T], Sequence[T]]:
        """``items`` as (asked first, the rest): under a budget and before any answer, the
        first item goes alone, so the endpoint's speed is measured in one short answer and the
        rest can be planned to it."""
        first = items[:1] if items and self.budget_s and not self.measured else items[:0]
        return first, items[len(first):]

    def output_per_item(self, items_left: int, prompt_tokens_per_item: int, planned: int, clock: float) -> int:
        """Output tokens to plan per decision: ``planned``, or less when the budget left at
        the measured rate cannot pay for ``items_left`` answers that long (never below
        :data:`MIN_OUTPUT_PER_ITEM`: the budget then decides fewer items, not worse ones)."""
        left, rate = self.left_s(clock), self.tokens_per_s
        if left is None or rate is None or items_left <= 0:
            return planned
        prompt_rate = self.prompt_tokens_per_s
        reading = items_left * prompt_tokens_per_item / prompt_rate if prompt_rate else 0.0
        affordable = int(max(0.0, left - reading) * rate / items_left)
        return max(MIN_OUTPUT_PER_ITEM, min(planned, affordable))

    def items_per_batch(self, output_per_item: int, planned: int) -> int:
        """Items per batch: ``planned``, or fewer where answering that many would take more than
        :data:`BATCH_S` at the measured rate (only under a budget)."""
        rate = self.tokens_per_s
        if self.budget_s is None or rate is None:
            return planned
        return max(1, min(planned, int(BATCH_S * rate / max(1, output_per_item))))


class StageProgress:
    """The progress line of one stage's questions: decisions asked/total, tokens/s, budget left."""

    def __init__(self, stage: str, total: int, pace: Pace) -> None:
        self.stage, self.total, self.pace, self.done = stage, total, pace, 0

    def line(self, elapsed: float) -> str:
        rate = self.pace.tokens_per_s
        left = self.pace.left_s(time.monotonic())
        return (f"llm {self.stage}: {self.done}/{self.total} decisions asked, "
                + (f"{rate:.1f} tokens/s" if rate else "measuring the endpoint")
                + ("" if left is None else f", {duration(left)} of the time budget left")
                + f" ({duration(elapsed)} so far)")
