"""The LLM brain: asks an OpenAI-compatible model, batch by batch, and keeps only what the
rails accept.

Per batch: one structured call (answers are pydantic models with ``reasoning`` before the
verdict); if the rails reject some decisions, one re-ask naming every violation; what is
still rejected (or never answered) is decided by the fallback brain, recorded as
``brain="llm->offline"`` with the violated rails in reason and evidence, and counted in
``usage.fallbacks``. Each accepted item is cached by its own request, so a test whose
evidence did not change is never asked again, whatever batch it lands in.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, Field

from testcurator.agents import rails
from testcurator.agents.brain import Brain, BrainContext, Usage, request_json
from testcurator.agents.decision import Decision, FileDecision, from_dict, to_dict
from testcurator.agents.llm_client import Correction, LLMAnswerError, LLMSettings, LLMTransportError, StructuredClient, digest
from testcurator.errors import BrainError
from testcurator.prompts import Prompt, load_prompt

FALLBACK_BRAIN = "llm->offline"
# A dead endpoint should stop the run (resumable), not fall back for hours, one timeout each.
MAX_CONSECUTIVE_TRANSPORT_ERRORS = 3


class ScopeItem(BaseModel):
    path: str = Field(description="The candidate path exactly as given.")
    reasoning: str
    evidence: list[str]
    keep: bool
    needs_review: bool
    missing: list[str]


class ScopeAnswer(BaseModel):
    decisions: list[ScopeItem]


class BucketItem(BaseModel):
    test: str = Field(description="The test name exactly as given (Class::test).")
    reasoning: str
    evidence: list[str]
    mode: Literal["mandatory_success", "xfail", "xfail_strict", "skip"]
    exclude_dtypes: list[str]
    exclude_ops: list[str]
    needs_review: bool
    missing: list[str]


class BucketAnswer(BaseModel):
    decisions: list[BucketItem]


class SummaryItem(BaseModel):
    test: str
    reasoning: str
    summary: str


class SummaryAnswer(BaseModel):
    summaries: list[SummaryItem]


class RailError(BrainError):
    """The fallback brain itself broke a rail: a bug in its rules, never papered over."""


R = TypeVar("R", Decision, FileDecision)


@dataclass(frozen=True)
class _Stage(Generic[R]):
    """What differs between scope, bucket and refine."""

    prompt: str
    answer: type[BaseModel]
    items_var: str
    record: type[R]
    key: Callable[[Any], str]
    to_record: Callable[[Any, Prompt], R]
    check: Callable[[Sequence[R], Sequence[Any], BrainContext], list[rails.RailViolation]]
    fallback: Callable[[Brain, Sequence[Any], BrainContext], list[R]]


def _decision(item: BucketItem, prompt: Prompt) -> Decision:
    return Decision(test=item.test, mode=item.mode, reason=item.reasoning, evidence=tuple(item.evidence),
                    brain="llm", prompt_hash=prompt.hash, needs_review=item.needs_review,
                    missing=tuple(item.missing), exclude_dtypes=tuple(item.exclude_dtypes),
                    exclude_ops=tuple(item.exclude_ops))


def _file_decision(item: ScopeItem, prompt: Prompt) -> FileDecision:
    return FileDecision(path=item.path, keep=item.keep, reason=item.reasoning, evidence=tuple(item.evidence),
                        brain="llm", prompt_hash=prompt.hash, needs_review=item.needs_review, missing=tuple(item.missing))


def _check_tests(decisions: Sequence[Decision], requests: Sequence[Any], ctx: BrainContext) -> list[rails.RailViolation]:
    return rails.check_bucket(decisions, requests, ctx.known_tests, ctx.backend)


def _check_paths(decisions: Sequence[FileDecision], requests: Sequence[Any], ctx: BrainContext) -> list[rails.RailViolation]:
    return rails.check_scope(decisions, requests, ctx.tree)


SCOPE = _Stage("scope", ScopeAnswer, "candidates", FileDecision, lambda r: r.path, _file_decision, _check_paths,
               lambda b, rs, c: b.scope(rs, c))
BUCKET = _Stage("bucket", BucketAnswer, "tests", Decision, lambda r: r.test, _decision, _check_tests,
                lambda b, rs, c: b.bucket(rs, c))
REFINE = _Stage("refine", BucketAnswer, "tests", Decision, lambda r: r.test, _decision, _check_tests,
                lambda b, rs, c: b.refine(rs, c))


class LLMBrain:
    """The ``llm`` entry of the brain registry (see the module docstring)."""

    name = "llm"

    def __init__(self, settings: LLMSettings, fallback: Brain, state_dir: Path | None = None,
                 client: StructuredClient | None = None) -> None:
        self.settings = settings
        self.fallback = fallback
        self.client = client if client is not None else StructuredClient(settings, state_dir)
        self.usage: Usage = self.client.usage
        self._transport_errors = 0

    def scope(self, requests: Sequence[Any], ctx: BrainContext) -> list[FileDecision]:
        return self._decide(SCOPE, requests, ctx)

    def bucket(self, requests: Sequence[Any], ctx: BrainContext) -> list[Decision]:
        return self._decide(BUCKET, requests, ctx)

    def refine(self, requests: Sequence[Any], ctx: BrainContext) -> list[Decision]:
        return self._decide(REFINE, requests, ctx)

    def _decide(self, stage: _Stage[R], requests: Sequence[Any], ctx: BrainContext) -> list[R]:
        prompt = load_prompt(stage.prompt)
        done: dict[str, R] = {}
        rejected: dict[str, list[str]] = {}
        todo = []
        for request in requests:
            hit = self._cached(stage, prompt, request, ctx)
            if hit is None:
                todo.append(request)
            elif isinstance(hit, list):
                rejected[stage.key(request)] = hit
            else:
                done[stage.key(request)] = hit
        size = max(1, self.settings.batch_size)
        for start in range(0, len(todo), size):
            batch = todo[start:start + size]
            accepted, refused, settled = self._batch(stage, prompt, batch, ctx)
            done.update(accepted)
            rejected.update(refused)
            # Remember every settled item, accepted or rejected by the rails, so no test is
            # asked twice; endpoint failures are not settled and are asked again next run.
            for request in batch if settled else [r for r in batch if stage.key(r) in accepted]:
                key = stage.key(request)
                value = to_dict(accepted[key]) if key in accepted else {"rejected": refused[key]}
                self.client.cache.put(self._item_key(stage, prompt, request, ctx), json.dumps(value))
        done.update(self._fall_back(stage, [r for r in requests if stage.key(r) in rejected], rejected, ctx))
        return [done[stage.key(r)] for r in requests]

    def _item_key(self, stage: _Stage[R], prompt: Prompt, request: Any, ctx: BrainContext) -> str:
        return digest("item", stage.prompt, request_json(request), ctx.backend.to_prompt(), prompt.hash, self.settings.model)

    def _cached(self, stage: _Stage[R], prompt: Prompt, request: Any, ctx: BrainContext) -> R | list[str] | None:
        text = self.client.cache.get(self._item_key(stage, prompt, request, ctx))
        if text is None:
            return None
        data = json.loads(text)
        self.usage.cached_items += 1
        if "rejected" in data:
            return list(data["rejected"])
        record = from_dict(stage.record, data)
        # Rails again: the tests in memory may have changed since the answer was cached.
        return None if stage.check([record], [request], ctx) else record

    def _batch(self, stage: _Stage[R], prompt: Prompt, batch: Sequence[Any],
               ctx: BrainContext) -> tuple[dict[str, R], dict[str, list[str]], bool]:
        """(accepted records, rejected keys -> why, settled) for one batch; ``settled`` is
        False when the endpoint or the answer format failed (worth asking again later)."""
        variables = {"backend": ctx.backend.to_prompt(), stage.items_var: [request_json(r) for r in batch]}
        content = json.dumps(variables, sort_keys=True, default=str)
        try:
            answer = self.client.call(prompt, variables, stage.answer, content)
        except (LLMAnswerError, LLMTransportError) as exc:
            why = self._failure(exc)  # one failed call is one error, however many tests it carried
            return {}, {stage.key(r): [why] for r in batch}, False
        accepted, problems = self._screen(stage, prompt, answer, batch, ctx, set())
        if len(accepted) < len(batch):
            self.usage.reasks += 1
            todo = [r for r in batch if stage.key(r) not in accepted]
            correction = Correction(answer.model_dump_json(), tuple(str(v) for v in problems))
            try:
                retry = self.client.call(prompt, variables, stage.answer, content, correction)
            except (LLMAnswerError, LLMTransportError) as exc:
                why = self._failure(exc)
                return accepted, {stage.key(r): [why] for r in todo}, False
            again, problems = self._screen(stage, prompt, retry, todo, ctx, set(accepted))
            accepted.update(again)
        self._transport_errors = 0
        refused: dict[str, list[str]] = {}
        keys = {stage.key(r) for r in batch}
        # Violations about names outside the batch (an invented test, a path outside the
        # tree) explain why the real requests got no decision: name them in the reason.
        stray = [f"the answer had instead: rail {v.rule} for {v.subject!r}: {v.message}" for v in problems if v.subject not in keys]
        for request in batch:
            key = stage.key(request)
            if key not in accepted:
                own = [f"rail {v.rule}: {v.message}" for v in problems if v.subject == key]
                refused[key] = (own + stray) or ["no decision"]
        return accepted, refused, True

    def _failure(self, exc: LLMAnswerError | LLMTransportError) -> str:
        if isinstance(exc, LLMAnswerError):
            self._transport_errors = 0
            return f"invalid answer after {exc.attempts} tries: {exc.last_error}"
        self._transport_errors += 1
        if self._transport_errors >= MAX_CONSECUTIVE_TRANSPORT_ERRORS:
            raise exc
        return f"endpoint error: {type(exc.cause).__name__}"

    def _screen(self, stage: _Stage[R], prompt: Prompt, answer: Any, batch: Sequence[Any], ctx: BrainContext,
                ignore: set[str]) -> tuple[dict[str, R], list[rails.RailViolation]]:
        """Records of ``answer`` the rails accept for ``batch`` (records for ``ignore``d keys,
        already accepted earlier, are dropped before checking), and the violations."""
        records = [rec for rec in (stage.to_record(i, prompt) for i in answer.decisions) if stage.key(rec) not in ignore]
        violations = stage.check(records, batch, ctx)
        self.usage.rail_violations += len(violations)
        wanted = {stage.key(r) for r in batch}
        bad = rails.rejected_subjects(violations, wanted)
        accepted = {stage.key(rec): rec for rec in records if stage.key(rec) in wanted and stage.key(rec) not in bad}
        return accepted, violations

    def _fall_back(self, stage: _Stage[R], requests: list[Any], why: dict[str, list[str]], ctx: BrainContext) -> dict[str, R]:
        if not requests:
            return {}
        records = stage.fallback(self.fallback, requests, ctx)
        broken = stage.check(records, requests, ctx)
        if broken:
            raise RailError(f"fallback brain {self.fallback.name!r} broke the rails: " + "; ".join(map(str, broken)))
        self.usage.fallbacks += len(records)
        out: dict[str, R] = {}
        for record in records:
            notes = why.get(stage.key(record), ["no usable answer"])
            out[stage.key(record)] = replace(  # type: ignore[type-var]
                record, brain=FALLBACK_BRAIN, reason=f"{record.reason} (llm answer rejected: {'; '.join(notes)})",
                evidence=(*record.evidence, *(f"llm rejected: {n}" for n in notes)))
        return out

    def summarize(self, tests: Sequence[dict[str, Any]]) -> dict[str, str]:
        """One short summary per test (``tests``: dicts with test, file, decorators, source);
        names the model invents are dropped, tests it skips are absent from the result."""
        prompt = load_prompt("summary")
        out: dict[str, str] = {}
        wanted = {t["test"] for t in tests}
        size = max(1, self.settings.batch_size)
        for start in range(0, len(tests), size):
            variables = {"tests": list(tests[start:start + size])}
            answer = self.client.call(prompt, variables, SummaryAnswer, json.dumps(variables, sort_keys=True, default=str))
            out.update({s.test: s.summary for s in answer.summaries if s.test in wanted})
        return out
