"""The LLM brain: asks an OpenAI-compatible model, batch by batch, and keeps only what the
rails accept.

Batches are planned from the model's context window (agents/llm/budget.py): the prompt, the
items and the answer's output-token cap must fit, with at most ``batch_size`` items; an item
too large for the window alone is never sent. Up to ``concurrency`` batches are in flight.

Time (agents/llm_budget.Pace): a stage's first question of a run carries one item, so that
the endpoint's speed is measured in one short answer; the rest are planned with answers as
long as what is left of ``budget_s`` can pay for at that speed, and a batch the budget cannot
pay for is not sent. A progress line says decisions asked/total, tokens/s and budget left.

Per batch: one structured call (answers are pydantic models with ``reasoning`` before the
verdict); if the rails reject some decisions, one re-ask naming every violation; what is
still rejected (or never answered, or not sent because the endpoint is down or the budget is
spent) is decided by the fallback brain, recorded as ``brain="llm->offline"`` with one line
saying which rule or field failed, or that the budget ran out, in the reason, and counted in
``usage.fallbacks`` (and ``usage.over_budget``). The model's own text of a
rejected answer goes to the audit log only. Each accepted item is cached by its own request,
so a test whose evidence did not change is never asked again, whatever batch it lands in.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from testcurator.agents import rails
from testcurator.agents.brain import Brain, BrainContext, Usage, request_json
from testcurator.agents.decision import (BUDGET_SPENT, FALLBACK_BRAIN, Decision, FileDecision, fallback_reason, from_dict,
                                         to_dict)
from testcurator.agents.llm.answers import SummaryAnswer
from testcurator.agents.llm.budget import Plan, StageProgress, plan_batches
from testcurator.agents.llm.cache import digest
from testcurator.agents.llm.client import Correction, LLMAnswerError, StructuredClient, problem_summary
from testcurator.config.llm import LLMSettings
from testcurator.agents.llm.negotiate import Narrow, keyed, one_line, with_schema_in_prompt
from testcurator.agents.llm.stages import BUCKET, REFINE, SCOPE, R, Stage
from testcurator.agents.llm.transport import LLMBudgetError, LLMTransportError
from testcurator.errors import BrainError
from testcurator.prompts import Prompt, load_prompt
from testcurator.runner.ticker import Ticker

MIN_SUMMARY_WORDS = 4
SUMMARY_SHARE = 0.1  # of the time budget the memory's summaries may use; the decisions get the rest


class RailError(BrainError):
    """The fallback brain itself broke a rail: a bug in its rules, never papered over."""


class LLMBrain:
    """The ``llm`` entry of the brain registry (see the module docstring)."""

    name = "llm"

    def __init__(self, settings: LLMSettings, fallback: Brain, state_dir: Path | None = None,
                 client: StructuredClient | None = None) -> None:
        self.settings = settings
        self.fallback = fallback
        self.client = client if client is not None else StructuredClient(settings, state_dir)
        self.usage: Usage = self.client.usage
        self.say: Callable[[str], None] = _stderr  # progress lines; the pipeline passes its own

    @property
    def writes_summaries(self) -> bool:
        """Whether the memory stage should ask this brain for test summaries."""
        return self.settings.summaries

    @property
    def summary_cache(self) -> Any:
        return self.client.cache

    @property
    def model(self) -> str:
        return self.settings.model

    def scope(self, requests: Sequence[Any], ctx: BrainContext) -> list[FileDecision]:
        return self._decide(SCOPE, requests, ctx)

    def bucket(self, requests: Sequence[Any], ctx: BrainContext) -> list[Decision]:
        return self._decide(BUCKET, requests, ctx)

    def refine(self, requests: Sequence[Any], ctx: BrainContext) -> list[Decision]:
        return self._decide(REFINE, requests, ctx)

    def _decide(self, stage: Stage[R], requests: Sequence[Any], ctx: BrainContext) -> list[R]:
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
        progress = StageProgress(stage.prompt, len(todo), self.client.transport.pace)
        with Ticker(progress.line, self.say):
            for part in self.client.transport.pace.measuring_first(todo):
                accepted, refused = self._ask(stage, prompt, part, ctx, progress)
                done.update(accepted)
                rejected.update(refused)
        done.update(self._fall_back(stage, [r for r in requests if stage.key(r) in rejected], rejected, ctx))
        return [done[stage.key(r)] for r in requests]

    def _ask(self, stage: Stage[R], prompt: Prompt, todo: Sequence[Any], ctx: BrainContext,
             progress: StageProgress) -> tuple[dict[str, R], dict[str, list[str]]]:
        """Batches of ``todo`` asked (see the module docstring): (accepted, rejected -> why)."""
        done: dict[str, R] = {}
        rejected: dict[str, list[str]] = {}
        plan = self._plan(prompt, stage.answer, [stage.view(r) for r in todo], ctx, stage.items_var)
        for index in plan.too_large:
            rejected[stage.key(todo[index])] = [f"request too large for the model's context window ({plan.budget} tokens)"]
        batches = [([todo[i] for i in b.indices], b.max_tokens) for b in plan.batches]
        workers = max(1, min(self.settings.concurrency, len(batches)))

        def run(job: tuple[list[Any], int]) -> tuple[dict[str, R], dict[str, list[str]], bool]:
            result = self._batch(stage, prompt, job[0], ctx, job[1])
            progress.done += len(job[0])
            return result

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm") as pool:
            results = list(pool.map(run, batches))
        for (batch, _), (accepted, refused, settled) in zip(batches, results):
            done.update(accepted)
            rejected.update(refused)
            # Remember every settled item, accepted or rejected by the rails, so no test is
            # asked twice; endpoint failures are not settled and are asked again next run.
            for request in batch if settled else [r for r in batch if stage.key(r) in accepted]:
                key = stage.key(request)
                value = to_dict(accepted[key]) if key in accepted else {"rejected": refused[key]}
                self.client.cache.put(self._item_key(stage, prompt, request, ctx), json.dumps(value))
        return done, rejected

    def _plan(self, prompt: Prompt, answer: type[BaseModel], items: list[dict[str, Any]], ctx: BrainContext | None,
              items_var: str) -> Plan:
        """Batches of ``items`` that fit the model's window, with answers as long as the time
        budget left can pay for (see the module docstring)."""
        if not items:
            return Plan((), (), 0)
        if self.client.down:  # nothing will be sent: one batch, failed at once, no window asked
            return plan_batches(0, [0] * len(items), context_tokens=10**9, max_items=len(items),
                                output_per_item=1, max_output_tokens=10**9)
        window, _ = self.client.context_window()
        variables: dict[str, Any] = {items_var: []} if ctx is None else {"backend": ctx.backend.to_prompt(), items_var: []}
        fixed = with_schema_in_prompt(self.client.mode, prompt.render(variables), answer)
        estimate = self.client.transport.tokens.estimate
        item_tokens = [estimate(json.dumps(item, indent=1, sort_keys=True, default=str)) for item in items]
        pace = self.client.transport.pace
        per_item = pace.output_per_item(len(items), sum(item_tokens) // len(items), self.settings.output_tokens_per_item,
                                        time.monotonic())
        return plan_batches(sum(estimate(m["content"]) for m in fixed), item_tokens, context_tokens=window,
                            max_items=pace.items_per_batch(per_item, self.settings.batch_size),
                            output_per_item=per_item, max_output_tokens=self.settings.max_output_tokens)

    def _item_key(self, stage: Stage[R], prompt: Prompt, request: Any, ctx: BrainContext) -> str:
        return digest("item", stage.prompt, request_json(request), ctx.backend.to_prompt(), prompt.hash, self.settings.model)

    def _cached(self, stage: Stage[R], prompt: Prompt, request: Any, ctx: BrainContext) -> R | list[str] | None:
        text = self.client.cache.get(self._item_key(stage, prompt, request, ctx))
        if text is None:
            return None
        data = json.loads(text)
        self.usage.cached_items += 1
        if "rejected" in data:
            return list(data["rejected"])
        record = from_dict(stage.record, data)
        # Rails again: the tests in memory, or the rails themselves, may have changed since.
        return None if self._violations(stage, prompt, [record], [request], ctx) else record

    def _batch(self, stage: Stage[R], prompt: Prompt, batch: Sequence[Any], ctx: BrainContext,
               max_tokens: int) -> tuple[dict[str, R], dict[str, list[str]], bool]:
        """(accepted records, rejected keys -> why, settled) for one batch; ``settled`` is
        False when the endpoint or the answer format failed (worth asking again later)."""
        variables = {"backend": ctx.backend.to_prompt(), stage.items_var: [stage.view(r) for r in batch]}
        content = json.dumps(variables, sort_keys=True, default=str)
        narrow = Narrow("decisions", stage.key_field, tuple(stage.key(r) for r in batch))
        try:
            answer = self.client.call(prompt, variables, stage.answer, content, max_tokens=max_tokens, narrow=narrow)
        except (LLMAnswerError, LLMTransportError, LLMBudgetError) as exc:
            return {}, self._unanswered(stage, exc, batch), False
        accepted, problems = self._screen(stage, prompt, answer, batch, ctx, set())
        if len(accepted) < len(batch):
            self.client.count(reasks=1)
            todo = [r for r in batch if stage.key(r) not in accepted]
            try:
                if problems and all(v.rule == rails.MISSING for v in problems):
                    # Cut off at the output cap (agents/llm_negotiate.complete_items kept the
                    # items before the cut): the rest is asked afresh, not the whole batch again.
                    rest = {**variables, stage.items_var: [stage.view(r) for r in todo]}
                    retry = self.client.call(prompt, rest, stage.answer, json.dumps(rest, sort_keys=True, default=str),
                                             max_tokens=max_tokens,
                                             narrow=Narrow("decisions", stage.key_field, tuple(stage.key(r) for r in todo)))
                else:
                    previous = json.dumps(keyed(answer.model_dump(), narrow), separators=(",", ":"))
                    correction = Correction(previous, tuple(str(v) for v in problems))
                    retry = self.client.call(prompt, variables, stage.answer, content, correction, max_tokens=max_tokens,
                                             narrow=narrow)
            except (LLMAnswerError, LLMTransportError, LLMBudgetError) as exc:
                return accepted, self._unanswered(stage, exc, todo), False
            again, problems = self._screen(stage, prompt, retry, todo, ctx, set(accepted))
            accepted.update(again)
        refused: dict[str, list[str]] = {}
        keys = {stage.key(r) for r in batch}
        # Names outside the batch (an invented test, a path outside the tree) are the model's
        # words: the reason counts them by rule, the audit log has them.
        stray = Counter(v.rule for v in problems if v.subject not in keys)
        others = [f"the answer named {n} {'name' if n == 1 else 'names'} not asked about (rail {rule})"
                  for rule, n in sorted(stray.items())]
        for request in batch:
            key = stage.key(request)
            if key not in accepted:
                own = [f"rail {v.rule}: {v.message}" for v in problems if v.subject == key]
                refused[key] = (own + others) or ["no decision"]
        return accepted, refused, True

    def _unanswered(self, stage: Stage[R], exc: LLMAnswerError | LLMTransportError | LLMBudgetError,
                    requests: Sequence[Any]) -> dict[str, list[str]]:
        """Why ``requests`` got no answer: one failed call is one error, however many tests it
        carried (and a call the budget could not pay for counts its tests as over budget)."""
        if isinstance(exc, LLMBudgetError):
            self.client.count(over_budget=len(requests))
        why = _failure(exc)
        return {stage.key(r): [why] for r in requests}

    def _screen(self, stage: Stage[R], prompt: Prompt, answer: Any, batch: Sequence[Any], ctx: BrainContext,
                ignore: set[str]) -> tuple[dict[str, R], list[rails.RailViolation]]:
        """Records of ``answer`` the rails accept for ``batch`` (records for ``ignore``d keys,
        already accepted earlier, are dropped before checking), and the violations."""
        records = [rec for rec in (stage.to_record(i, prompt) for i in answer.decisions) if stage.key(rec) not in ignore]
        violations = self._violations(stage, prompt, records, batch, ctx)
        self.client.count(rail_violations=len(violations))
        if violations:
            self.client.audit.write(kind="rails_rejected", prompt=prompt.name, model=self.settings.model,
                                    problem="; ".join(f"[{v.rule}] {v.message}" for v in violations[:20]),
                                    subjects=[v.subject for v in violations[:50]], raw=answer.model_dump_json())
        wanted = {stage.key(r) for r in batch}
        bad = rails.rejected_subjects(violations, wanted)
        accepted = {stage.key(rec): rec for rec in records if stage.key(rec) in wanted and stage.key(rec) not in bad}
        return accepted, violations

    def _violations(self, stage: Stage[R], prompt: Prompt, records: Sequence[R], batch: Sequence[Any],
                    ctx: BrainContext) -> list[rails.RailViolation]:
        """Every rail the model's ``records`` for ``batch`` break (fresh answers and cached ones alike)."""
        violations = stage.check(records, batch, ctx)
        violations += rails.check_reasons([(stage.key(rec), rec.reason) for rec in records], prompt.system)
        if stage.record is FileDecision and any(not rec.keep for rec in records):  # type: ignore[attr-defined]
            # Only a keep the rules are sure of (device-generic tests, a hooked feature): one they
            # keep for review, knowing nothing, the model may overrule.
            kept = {d.path: d.reason for d in self.fallback.scope(list(batch), ctx) if d.keep and not d.needs_review}
            violations += rails.check_drops(records, kept)  # type: ignore[arg-type]
        if stage.record is Decision:  # the model's exclusions must be ones a config can carry
            violations += rails.check_edits(records, batch)  # type: ignore[arg-type]
            violations += rails.check_claims(records, batch)  # type: ignore[arg-type]
        return violations

    def _fall_back(self, stage: Stage[R], requests: list[Any], why: dict[str, list[str]], ctx: BrainContext) -> dict[str, R]:
        if not requests:
            return {}
        records = stage.fallback(self.fallback, requests, ctx)
        broken = stage.check(records, requests, ctx)
        if broken:
            raise RailError(f"fallback brain {self.fallback.name!r} broke the rails: " + "; ".join(map(str, broken)))
        self.client.count(fallbacks=len(records))
        out: dict[str, R] = {}
        for record in records:
            notes = [one_line(n, 160) for n in why.get(stage.key(record), ["no usable answer"])]
            out[stage.key(record)] = replace(  # type: ignore[type-var]
                record, brain=FALLBACK_BRAIN, reason=fallback_reason(record.reason, one_line('; '.join(notes), 300)),
                evidence=(*record.evidence, *(f"llm: {n}" for n in notes)))
        return out

    def summarize(self, tests: Sequence[dict[str, Any]]) -> dict[str, str]:
        """One short summary per test (``tests``: dicts with test, file, decorators, source),
        batched to the window; names the model invents are dropped, and tests it skips, or
        whose batch failed, are absent from the result (their offline summary stays). Under a
        time budget they get :data:`SUMMARY_SHARE` of it: the decisions need the rest more."""
        prompt = load_prompt("summary")
        wanted = {t["test"] for t in tests}
        out: dict[str, str] = {}
        pace = self.client.transport.pace
        for part in pace.measuring_first(list(tests)):
            for batch in self._plan(prompt, SummaryAnswer, list(part), None, "tests").batches:
                if not pace.admits(batch.prompt_tokens, batch.max_tokens, time.monotonic(), share=SUMMARY_SHARE):
                    return out
                variables = {"tests": [part[i] for i in batch.indices]}
                try:
                    answer = self.client.call(prompt, variables, SummaryAnswer,
                                              json.dumps(variables, sort_keys=True, default=str), max_tokens=batch.max_tokens,
                                              narrow=Narrow("summaries", "test", tuple(t["test"] for t in variables["tests"])))
                except (LLMAnswerError, LLMTransportError, LLMBudgetError):
                    continue  # counted in usage; the offline summary stands for these tests
                out.update({s.test: one_line(s.summary, 600) for s in answer.summaries
                            if s.test in wanted and _useful(s.test, s.summary)})
        return out


def _stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _useful(test: str, summary: str) -> bool:
    """A summary says something beyond the name (a small model often just echoes it)."""
    return summary.strip() != test and len(summary.split()) >= MIN_SUMMARY_WORDS


def _failure(exc: LLMAnswerError | LLMTransportError | LLMBudgetError) -> str:
    """One line: which field failed, or what the endpoint did; never the model's text."""
    if isinstance(exc, LLMBudgetError):
        return f"not asked: {BUDGET_SPENT} ({exc.budget_s:g} s) was spent"
    if isinstance(exc, LLMAnswerError):
        return f"invalid answer after {exc.attempts} tries: {problem_summary(exc.last_error)}"
    if exc.down:
        return "endpoint down: not asked"
    return f"endpoint error: {exc.kind}"
