"""The run report, as markdown (for a PR) and JSON (for machines), beside the configs."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testcurator.config.yamlio import atomic_write_text
from testcurator.pipelines import brain_report
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.store import RunStore

MODES = ("mandatory_success", "xfail", "xfail_strict", "skip")


def collect(ctx: RunContext, store: RunStore, state: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the report says, as plain data."""
    stage = "refine" if state.get("executed") else "bucket"
    per_file: dict[str, dict[str, int]] = {}
    review: list[dict[str, Any]] = []
    fallbacks: list[dict[str, Any]] = []  # LLM answers the rails rejected, decided offline
    brains: Counter[str] = Counter()
    for rel in state.get("files", []):
        decisions = store.read_decisions(stage, rel) or []
        per_file[rel] = {m: n for m, n in Counter(d.mode for d in decisions).items()}
        brains.update(d.brain for d in decisions)
        review += [{"file": rel, "test": d.test, "mode": d.mode, "reason": d.reason, "missing": list(d.missing)}
                   for d in decisions if d.needs_review]
        fallbacks += [{"file": rel, "test": d.test, "mode": d.mode, "reason": d.reason}
                      for d in decisions if "->" in d.brain]
    per_file = _config_counts(ctx, state.get("files", [])) or per_file  # what the configs say, human edits included
    totals: Counter[str] = Counter()
    for counts in per_file.values():
        totals.update(counts)
    scope = store.read_scope() or []
    scope_fallbacks = [{"file": d.path, "test": None, "mode": "keep" if d.keep else "drop", "reason": d.reason}
                       for d in scope if "->" in d.brain]
    return {
        "backend": ctx.profile.name, "device": ctx.device, "torch_root": str(ctx.torch_root),
        "decided_by": stage, "totals": {m: totals.get(m, 0) for m in MODES}, "per_file": per_file,
        "scope": [{"path": d.path, "keep": d.keep, "reason": d.reason} for d in scope],
        "needs_review": review, "llm_fallbacks": fallbacks + scope_fallbacks, "brains": dict(brains), "usage": ctx.brain.usage.as_dict(),
        "timings_s": store.read_json("timings.json", {}), "memory": store.read_json("memory.json", {}),
        "emit": store.read_json("emit.json", {}), "verify": store.read_json("verify.json"),
        **brain_report.sections(ctx, store, state),  # "llm" and "eval"
    }


def _config_counts(ctx: RunContext, files: Any) -> dict[str, dict[str, int]]:
    """Modes per upstream file in the emitted configs (empty before any were written)."""
    from testcurator.config.loader import load_config
    from testcurator.pipelines.emit import config_path

    out: dict[str, dict[str, int]] = {}
    for rel in files:
        path = config_path(ctx.configs_dir, rel)
        if path.exists():
            loaded = load_config(path, torch_root=ctx.torch_root)
            out[rel] = dict(Counter(e.mode for f in loaded.files for e in f.entries for _ in e.names))
    return out


def _markdown(data: Mapping[str, Any]) -> str:
    lines = [f"# testcurator run: {data['backend']} ({data['device']})", ""]
    totals = data["totals"]
    lines += [f"**{sum(totals.values())} tests decided** ({data['decided_by']} stage): "
              + ", ".join(f"{m} {totals[m]}" for m in MODES), ""]
    lines += ["## Per file", "", "| file | " + " | ".join(MODES) + " |", "|---|" + "---|" * len(MODES)]
    for rel, counts in sorted(data["per_file"].items()):
        lines.append(f"| {rel} | " + " | ".join(str(counts.get(m, 0)) for m in MODES) + " |")
    lines += ["", "## Scope", ""] + [f"- {'kept' if s['keep'] else 'dropped'} `{s['path']}`: {s['reason']}" for s in data["scope"]]
    lines += ["", f"## Needs review ({len(data['needs_review'])})", ""]
    lines += [f"- `{r['file']}::{r['test']}` ({r['mode']}): {r['reason']}" for r in data["needs_review"]] or ["- none"]
    fallbacks = data.get("llm_fallbacks", [])
    if fallbacks:
        lines += ["", f"## LLM answers rejected by the rails ({len(fallbacks)}), decided by the offline brain", ""]
        lines += [f"- `{f['file']}{'::' + f['test'] if f['test'] else ''}` ({f['mode']}): {f['reason']}" for f in fallbacks]
    emit = data.get("emit") or {}
    conflicts = emit.get("conflicts", [])
    lines += ["", f"## Human edits kept ({len(emit.get('kept_human', []))}), contradicted by execution ({len(conflicts)})", ""]
    lines += [f"- `{c['file']}::{c['test']}`: human says {c['human_mode']}, execution says {c['evidence_mode']}: {c['reason']}"
              for c in conflicts] or ["- none contradicted"]
    verify = data.get("verify")
    if verify:
        lines += ["", "## Verification run of the curated suite", "",
                  "- outcomes: " + ", ".join(f"{k} {v}" for k, v in verify["outcomes"].items()),
                  f"- mandatory_success failures: {len(verify['mandatory_failures'])}",
                  f"- unexpected passes (xfail): {len(verify['unexpected_passes'])}"]
        lines += [f"  - `{n}`" for n in verify["mandatory_failures"][:50]]
    lines += ["", "## Brains and LLM usage", "", "- decisions by brain: " + ", ".join(f"{k} {v}" for k, v in sorted(data["brains"].items())),
              "- usage: " + ", ".join(f"{k} {v}" for k, v in sorted(data["usage"].items())), "",
              brain_report.markdown(data), "## Time per stage (s)", ""] + [f"- {k}: {v}" for k, v in data["timings_s"].items()]
    return "\n".join(lines) + "\n"


def write_report(ctx: RunContext, store: RunStore, state: Mapping[str, Any]) -> Path:
    data = collect(ctx, store, state)
    atomic_write_text(ctx.out_dir / "report.json", json.dumps(data, indent=1, sort_keys=True) + "\n")
    path = ctx.out_dir / "report.md"
    atomic_write_text(path, _markdown(data))
    return path
