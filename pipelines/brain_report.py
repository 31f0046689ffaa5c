"""The report's brain sections: the LLM brain's endpoint and usage, and the measured brains.

``sections`` returns plain data for report.json; ``markdown`` renders it for report.md.
pipelines/report.py calls both and adds nothing else. Also writes ``run.json`` in the run
directory: what ``testcurator eval RUN_DIR`` needs to find the run's inputs again.

LLM section: who decided (the LLM's share of all decisions, scope included), the
structured-output mode the endpoint settled on and how, whether it went down, the context
window and its source, calls, tokens (reported and estimated), seconds, tokens per second,
seconds per decision asked, re-asks, fallbacks, and the audit log of rejected answers.
Eval section (runs that executed): the run's own pre-execution decisions and the offline
brain's, judged against the draft's results (pipelines/evaluate.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from testcurator.agents.decision import BUDGET_SPENT, LLM_BRAIN
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.evaluate import BrainSource, EvalRun, PredictionSource, StoredSource, compare, markdown as eval_markdown
from testcurator.pipelines.store import RunStore

RUN_FILE = "run.json"


def eval_run(ctx: RunContext, store: RunStore, files: list[str], llm: Mapping[str, Any] | None = None) -> EvalRun:
    return EvalRun(run_dir=store.root, torch_root=ctx.torch_root, profile_path=ctx.profile_path, out_dir=ctx.out_dir,
                   state_dir=ctx.state_dir, files=tuple(files), llm=dict(llm or {}))


def _decisions(store: RunStore, stage: str, files: list[str]) -> tuple[Counter[str], list[tuple[str, ...]]]:
    """(decisions by brain, the evidence of each decision not made by the brain asked first)."""
    brains: Counter[str] = Counter()
    fell_back: list[tuple[str, ...]] = []
    for decision in [d for rel in files for d in store.read_decisions(stage, rel) or []] + list(store.read_scope() or []):
        brains[decision.brain] += 1
        if "->" in decision.brain:
            fell_back.append(decision.evidence)
    return brains, fell_back


def _cause(evidence: tuple[str, ...]) -> str:
    """Why the LLM's decision was not taken, from the fallback's evidence (agents/llm/brain.py)."""
    notes = " ".join(e for e in evidence if e.startswith("llm: "))
    for needle, cause in ((BUDGET_SPENT, "time budget spent"), ("endpoint down", "endpoint down"),
                          ("endpoint error", "endpoint error"), ("invalid answer", "invalid answer"),
                          ("context window", "too large for the window"), ("rail ", "rails")):
        if needle in notes:
            return cause
    return "other"


def llm_section(ctx: RunContext, store: RunStore, stage: str, files: list[str]) -> dict[str, Any] | None:
    client = getattr(ctx.brain, "client", None)
    if client is None:
        return None
    brains, fell_back = _decisions(store, stage, files)
    causes = Counter(_cause(evidence) for evidence in fell_back)
    total = sum(brains.values())
    usage = ctx.brain.usage
    asked = max(0, total - usage.cached_items)
    status = client.status()
    return {
        **status,
        "decisions_by_brain": dict(sorted(brains.items())),
        "fallback_causes": dict(sorted(causes.items())),
        "llm_share": round(brains.get(LLM_BRAIN, 0) / total, 3) if total else None,
        "tokens_per_s": status["tokens_per_s"] or (round(usage.completion_tokens / usage.latency_s, 2)
                                                   if usage.latency_s else None),
        "s_per_decision_asked": round(usage.latency_s / asked, 2) if asked and usage.calls else None,
        "usage": usage.as_dict(),
    }


def eval_section(ctx: RunContext, store: RunStore, files: list[str]) -> dict[str, Any] | None:
    if not store.path("exec", "results.jsonl").exists():
        return None
    stored = StoredSource()
    brains, _ = _decisions(store, "bucket", files)
    stored.name = "llm (this run)" if any(b.startswith("llm") for b in brains) else "offline (this run)"
    sources: list[PredictionSource] = [stored]
    if stored.name.startswith("llm"):
        sources.append(BrainSource("offline"))
    return compare(eval_run(ctx, store, files), sources)


def sections(ctx: RunContext, store: RunStore, state: Mapping[str, Any]) -> dict[str, Any]:
    files = list(state.get("files", []))
    stage = "refine" if state.get("executed") else "bucket"
    llm_client = getattr(ctx.brain, "client", None)
    store.write_json(RUN_FILE, {"torch_root": str(ctx.torch_root), "profile": str(ctx.profile_path),
                                "out_dir": str(ctx.out_dir), "state_dir": str(ctx.state_dir), "files": files,
                                "memory_limit_mb": ctx.memory_limit_mb,
                                "llm": {"base_url": llm_client.settings.base_url, "model": llm_client.settings.model}
                                if llm_client is not None else None})
    return {"llm": llm_section(ctx, store, stage, files), "eval": eval_section(ctx, store, files)}


def markdown(data: Mapping[str, Any]) -> str:
    lines: list[str] = []
    llm = data.get("llm")
    if llm:
        usage = llm["usage"]
        share = llm["llm_share"]
        lines += ["## LLM brain", "",
                  f"- endpoint `{llm['endpoint']}`, model `{llm['model']}`: structured output **{llm['mode']}**"
                  + (f" (negotiated: {'; '.join(llm['negotiation'])})" if llm["negotiation"] else ""),
                  f"- LLM share of decisions: **{'n/a' if share is None else f'{share:.0%}'}** ("
                  + ", ".join(f"{k} {v}" for k, v in llm["decisions_by_brain"].items()) + ")"]
        causes = llm.get("fallback_causes") or {}
        if causes:
            lines.append("- decided by the offline brain instead, by why: "
                         + ", ".join(f"{k} {v}" for k, v in causes.items()))
        if llm["down"]:
            lines.append(f"- **endpoint down**: {llm['down']}; the offline brain decided what was left "
                         "(the configs are valid; rerun to ask the LLM again)")
        if llm.get("budget_s"):
            lines.append(f"- time budget {llm['budget_s']:.0f} s (`--llm-budget-s`), {llm['budget_spent_s']:.0f} s spent; "
                         f"{usage.get('over_budget', 0)} decision(s) not asked within it; prompts reached their first "
                         f"token at {llm.get('prompt_tokens_per_s') or 'n/a'} estimated tokens/s (a prefix the "
                         "server kept from an earlier request counts, though it was not read again)")
        lines += [f"- context window {llm['context_tokens']} tokens ({llm['context_source']}), output cap "
                  f"{llm['max_output_tokens']}, concurrency {llm['concurrency']}, idle timeout {llm['idle_timeout_s']} s",
                  f"- {usage['calls']} call(s), {usage['prompt_tokens']} prompt tokens (estimated "
                  f"{usage['estimated_prompt_tokens']}), {usage['completion_tokens']} completion tokens, "
                  f"{usage['latency_s']} s waiting; {llm['tokens_per_s'] or 'n/a'} tokens/s, "
                  f"{llm['s_per_decision_asked'] or 'n/a'} s per decision asked",
                  f"- {usage['cached_items'] + usage['cache_hits']} answer(s) from cache, {usage['reasks']} re-ask(s), "
                  f"{usage['failures']} failure(s), {usage['transport_retries']} transport retr(ies), "
                  f"{usage['downshifts']} format downshift(s), {usage['rail_violations']} rail violation(s), "
                  f"{usage['fallbacks']} fallback(s) to the offline brain"]
        if llm["audit_records"]:
            lines.append(f"- {llm['audit_records']} rejected answer(s) with the model's raw text: `{llm['audit_log']}`")
        lines.append("")
    result = data.get("eval")
    if result:
        lines += ["## Brains measured against execution", "",
                  "Decisions before execution, judged by what the draft run found (wrong: a skip that passes, "
                  "a mandatory_success that fails, an xfail that passes; not run: skipped tests the draft did "
                  "not execute: `testcurator eval RUN_DIR --run-unrun` runs them).", ""]
        lines += eval_markdown(result) + [""]
    return "\n".join(lines)
