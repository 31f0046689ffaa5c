"""Where and how the LLM brain asks a model: the ``llm:`` section of a config and the
environment (OPENAI_BASE_URL, TESTCURATOR_LLM_*), as one frozen settings object.

Here, below the agents, so that the brain Protocol's settings (agents/brain.py) and the LLM
brain's client and transport (agents/llm/) read one type without importing each other.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from testcurator.errors import BadInputError

#: The structured-output ladder, best first (agents/llm/negotiate.py walks it down).
OUTPUT_MODES = ("json_schema", "json_object_schema", "json_object", "text")
# The client insists on a key; local servers (vLLM, Ollama, llama.cpp) ignore it.
_NO_KEY = "not-needed"


@dataclass(frozen=True)
class LLMSettings:
    """Where and how to ask (README: "The LLM brain").

    ``max_tries`` bounds re-asks for unusable answers; ``max_retries`` bounds retries of a
    refused connection or an HTTP error (backoff from ``retry_backoff`` seconds, doubling).
    ``idle_timeout`` is the longest silence (no token, no keep-alive) a streamed answer may
    have; there is no total timeout. ``budget_s`` caps the seconds a run spends waiting for
    the model (0: no cap); what it cannot pay for is decided by the offline brain. ``context_tokens``
    is the window when the server does not state one; ``max_output_tokens`` caps every
    answer; ``output_tokens_per_item`` is what one decision's answer is planned to take;
    ``batch_size`` caps items per request; ``concurrency`` caps requests in flight;
    ``structured_output`` is the first rung of the negotiation ladder; ``summaries`` lets the
    model write the memory's test summaries.
    """

    base_url: str
    model: str
    api_key: str = field(default=_NO_KEY, repr=False)
    idle_timeout: float = 300.0
    budget_s: float = 900.0
    max_tries: int = 3
    max_retries: int = 2
    retry_backoff: float = 1.0
    batch_size: int = 20
    context_tokens: int = 4096
    max_output_tokens: int = 2048
    output_tokens_per_item: int = 200
    # One: llama.cpp's servers answer one request at a time, and one waiting its turn only
    # delays the answer in flight (and may interrupt it: llama-cpp-python's interrupt_requests).
    concurrency: int = 1
    structured_output: str = OUTPUT_MODES[0]
    summaries: bool = True
    temperature: float | None = 0.0

    def __post_init__(self) -> None:
        if self.structured_output not in OUTPUT_MODES:
            raise BadInputError(f"llm.structured_output: {self.structured_output!r} is not one of {', '.join(OUTPUT_MODES)}")
        if self.budget_s < 0:
            raise BadInputError(f"llm.budget_s must be 0 (no budget) or positive, got {self.budget_s!r}")
        for name in ("idle_timeout", "max_tries", "batch_size", "context_tokens", "max_output_tokens",
                     "output_tokens_per_item", "concurrency"):
            if getattr(self, name) <= 0:
                raise BadInputError(f"llm.{name} must be positive, got {getattr(self, name)!r}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> LLMSettings | None:
        """Settings from OPENAI_BASE_URL / OPENAI_API_KEY / TESTCURATOR_LLM_* (one variable
        per field, e.g. TESTCURATOR_LLM_CONTEXT_TOKENS), explicit ``overrides`` (non-None,
        e.g. a config's ``llm:`` section) winning; None when no base URL is given anywhere."""
        env = os.environ if env is None else env
        given = {k: v for k, v in overrides.items() if v is not None}
        base_url = given.pop("base_url", None) or env.get("OPENAI_BASE_URL")
        if not base_url:
            return None
        model = given.pop("model", None) or env.get("TESTCURATOR_LLM_MODEL")
        if not model:
            raise BadInputError(f"LLM endpoint {base_url} given but no model: set TESTCURATOR_LLM_MODEL or llm.model")
        api_key = given.pop("api_key", None) or env.get("OPENAI_API_KEY") or _NO_KEY
        unknown = sorted(set(given) - _TUNABLE)
        if unknown:
            raise BadInputError(f"unknown llm setting(s): {', '.join(unknown)} (known: {', '.join(sorted(_TUNABLE))})")
        for name in _TUNABLE - set(given):
            value = env.get(f"TESTCURATOR_LLM_{name.upper()}")
            if value:
                given[name] = _typed(name, value)
        return cls(base_url=base_url, model=model, api_key=api_key, **given)

    @classmethod
    def require(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> LLMSettings:
        """As :meth:`from_env`, but a missing base URL is bad input (``--brain llm``)."""
        settings = cls.from_env(env, **overrides)
        if settings is None:
            raise BadInputError("--brain llm needs an OpenAI-compatible endpoint: set OPENAI_BASE_URL "
                                "(and TESTCURATOR_LLM_MODEL) or llm.base_url / llm.model in the config")
        return settings


def _typed(name: str, value: str) -> Any:
    kind = LLMSettings.__dataclass_fields__[name].type
    if "bool" in str(kind):
        if value.lower() not in ("1", "0", "true", "false", "yes", "no"):
            raise BadInputError(f"TESTCURATOR_LLM_{name.upper()}={value!r}: expected true or false")
        return value.lower() in ("1", "true", "yes")
    try:
        if "float" in str(kind):
            return float(value)
        if "int" in str(kind):
            return int(value)
    except ValueError:
        raise BadInputError(f"TESTCURATOR_LLM_{name.upper()}={value!r}: expected a number") from None
    return value


_TUNABLE = frozenset(LLMSettings.__dataclass_fields__) - {"base_url", "model", "api_key"}
