"""Frozen decision records: what a brain decided, why, on what evidence, and who decided.

:class:`Decision` is one test's mode (stages 3 and 4); :class:`FileDecision` is one path
kept or dropped (stage 1). Both are plain frozen dataclasses of JSON types, so LangGraph
checkpoints serialise them as they are; :func:`to_json` / :func:`from_json` give an explicit
round trip for reports and caches.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

from testcurator.errors import BrainError
from testcurator.vocab import Mode

# Who decided: the LLM brain's own answers, and what its fallback decided in their place
# (agents/llm/brain.py); a fallback's reason and evidence say why, BUDGET_SPENT when the run's
# time budget for the model ran out (the report counts the causes).
LLM_BRAIN = "llm"
FALLBACK_BRAIN = "llm->offline"
BUDGET_SPENT = "the LLM's time budget"
_NOT_LLMS = " (not the LLM's decision: "


def fallback_reason(reason: str, why: str) -> str:
    """The reason of a decision the offline brain made in the LLM's place, saying why: one note,
    the latest (a refine fallback keeps its bucket decision's reason, and that reason's note)."""
    return f"{reason.split(_NOT_LLMS, 1)[0]}{_NOT_LLMS}{why})"


@dataclass(frozen=True)
class Decision:
    """One test's mode, with its reason and evidence.

    ``brain`` names who decided (``offline``, ``llm``, or ``llm->offline`` when the LLM's
    answer failed the rails and the offline brain decided). ``exclude_dtypes`` /
    ``exclude_ops`` / ``exclude_modules`` / ``exclude_params`` become the config entry's ``edits`` (an
    unsupported dtype, or one failing @parametrize value, costs that much, not the whole test). ``needs_review`` marks cases the evidence cannot settle;
    ``missing`` says what would settle them.
    """

    test: str
    mode: Mode
    reason: str
    evidence: tuple[str, ...]
    brain: str
    prompt_hash: str | None
    needs_review: bool = False
    missing: tuple[str, ...] = ()
    exclude_dtypes: tuple[str, ...] = ()
    exclude_ops: tuple[str, ...] = ()
    exclude_modules: tuple[str, ...] = ()
    exclude_params: tuple[str, ...] = ()  # ``name=value`` (config/params.py param_ref)
    # Read back from a config entry the pipeline wrote and nobody changed since (its
    # fingerprint is in configs/.emitted.json): a machine's decision, not a person's.
    machine_made: bool = False

    def __post_init__(self) -> None:
        _tuplify(self, ("evidence", "missing", "exclude_dtypes", "exclude_ops", "exclude_modules", "exclude_params"))

    @property
    def by_human(self) -> bool:
        """Whether the decision is what a config says and a person may have written it (not
        a brain's, nor an entry the pipeline wrote that nobody changed): execution may then
        only propose a change, never make it."""
        return self.brain == CONFIG_BRAIN and not self.machine_made


#: ``Decision.brain`` of a decision read back from a config entry.
CONFIG_BRAIN = "config"


@dataclass(frozen=True)
class FileDecision:
    """One path of the upstream test tree kept (analysed further) or dropped, and why."""

    path: str
    keep: bool
    reason: str
    evidence: tuple[str, ...]
    brain: str
    prompt_hash: str | None
    needs_review: bool = False
    missing: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _tuplify(self, ("evidence", "missing"))


def _tuplify(record: object, names: tuple[str, ...]) -> None:
    # Records built from JSON (or by careless callers) carry lists; frozen records must hold
    # tuples so they stay hashable and compare equal after a round trip.
    for name in names:
        value = getattr(record, name)
        if not isinstance(value, tuple):
            object.__setattr__(record, name, tuple(value))


R = TypeVar("R", Decision, FileDecision)


def to_dict(record: Decision | FileDecision) -> dict[str, Any]:
    """A record as a dict of JSON types (tuples become lists)."""
    return {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(record).items()}


def from_dict(cls: type[R], data: Mapping[str, Any]) -> R:
    """Rebuild a record; unknown or missing keys are a :class:`DecisionFormatError`."""
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise DecisionFormatError(f"{cls.__name__}: unknown keys {unknown}")
    try:
        return cls(**data)
    except TypeError as exc:
        raise DecisionFormatError(f"{cls.__name__}: {exc}") from exc


def to_json(records: Iterable[Decision | FileDecision]) -> str:
    """A list of records as JSON text (stable key order)."""
    return json.dumps([to_dict(r) for r in records], sort_keys=True)


def from_json(cls: type[R], text: str) -> list[R]:
    """The inverse of :func:`to_json` for one record type."""
    data = json.loads(text)
    if not isinstance(data, list):
        raise DecisionFormatError(f"expected a JSON list of {cls.__name__} records")
    return [from_dict(cls, item) for item in data]


class DecisionFormatError(BrainError):
    """Stored decisions do not match the record format."""
