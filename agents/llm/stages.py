"""What differs between the LLM brain's stages (scope, bucket, refine): the prompt, the answer
model, how an answer item becomes a frozen decision record, the rails it must pass, and the
fallback brain's entry point. agents/llm/brain.py drives them all the same way."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from testcurator.agents import rails
from testcurator.agents.brain import Brain, BrainContext, request_json
from testcurator.agents.decision import LLM_BRAIN, Decision, FileDecision
from testcurator.agents.llm.answers import BucketAnswer, BucketItem, ScopeAnswer, ScopeItem
from testcurator.agents.llm.evidence import view
from testcurator.agents.llm.negotiate import one_line
from testcurator.prompts import Prompt

REASON_CHARS = 600  # an accepted answer's reasoning, on one line, becomes the config comment
EVIDENCE_ITEMS = 10

R = TypeVar("R", Decision, FileDecision)


@dataclass(frozen=True)
class Stage(Generic[R]):
    """What differs between scope, bucket and refine."""

    prompt: str
    answer: type[BaseModel]
    items_var: str
    record: type[R]
    key: Callable[[Any], str]
    to_record: Callable[[Any, Prompt], R]
    check: Callable[[Sequence[R], Sequence[Any], BrainContext], list[rails.RailViolation]]
    fallback: Callable[[Brain, Sequence[Any], BrainContext], list[R]]
    view: Callable[[Any], dict[str, Any]]  # a request as the prompt shows it (agents/llm/evidence.py)

    @property
    def key_field(self) -> str:
        """The answer item's field that names the request (what the answer is narrowed on)."""
        return "path" if self.record is FileDecision else "test"


def _evidence(items: Sequence[str]) -> tuple[str, ...]:
    return tuple(one_line(e, 200) for e in items[:EVIDENCE_ITEMS])


def _decision(item: BucketItem, prompt: Prompt) -> Decision:
    return Decision(test=item.test, mode=item.mode, reason=one_line(item.reasoning, REASON_CHARS), evidence=_evidence(item.evidence),
                    brain=LLM_BRAIN, prompt_hash=prompt.hash, needs_review=item.needs_review,
                    missing=tuple(item.missing), exclude_dtypes=tuple(item.exclude_dtypes),
                    exclude_ops=tuple(item.exclude_ops))


def _file_decision(item: ScopeItem, prompt: Prompt) -> FileDecision:
    return FileDecision(path=item.path, keep=item.keep, reason=one_line(item.reasoning, REASON_CHARS), evidence=_evidence(item.evidence),
                        brain=LLM_BRAIN, prompt_hash=prompt.hash, needs_review=item.needs_review, missing=tuple(item.missing))


def _check_tests(decisions: Sequence[Decision], requests: Sequence[Any], ctx: BrainContext) -> list[rails.RailViolation]:
    return rails.check_bucket(decisions, requests, ctx.known_tests, ctx.backend)


def _check_paths(decisions: Sequence[FileDecision], requests: Sequence[Any], ctx: BrainContext) -> list[rails.RailViolation]:
    return rails.check_scope(decisions, requests, ctx.tree)


SCOPE = Stage("scope", ScopeAnswer, "candidates", FileDecision, lambda r: r.path, _file_decision, _check_paths,
               lambda b, rs, c: b.scope(rs, c), request_json)
BUCKET = Stage("bucket", BucketAnswer, "tests", Decision, lambda r: r.test, _decision, _check_tests,
                lambda b, rs, c: b.bucket(rs, c), view)
REFINE = Stage("refine", BucketAnswer, "tests", Decision, lambda r: r.test, _decision, _check_tests,
                lambda b, rs, c: b.refine(rs, c), view)
