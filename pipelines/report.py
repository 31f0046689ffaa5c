"""The run report, as markdown (for a PR) and JSON (for machines), beside the configs.

The markdown opens with what a person reads in ten seconds (the verdict, the counts, what
is held back and why, the run's identity: torch version, upstream revision, date, command,
exit code, total time) and puts the detail below: per file with a link to its config,
skipped and xfailed tests grouped by reason with counts (as the configs decide them, and as
the verification run saw them, per instance), scope, review items, stage times in pipeline
order. The command and exit code are filled in by the CLI when it ends
(:func:`finish_report`); a report whose command never ended says so.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from testcurator.files import atomic_write_text
from testcurator.installed import torch_version
from testcurator.pipelines import brain_report
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.nights.identity import upstream_revision
from testcurator.pipelines.report_md import markdown, ordered_timings, regressed
from testcurator.pipelines.probe import overturned
from testcurator.pipelines.store import RunStore
from testcurator.runner.results.records import TestRecord, read_jsonl
from testcurator.vocab import HELD_BACK_MODES, MODES, TestKey

# The plugin ends its reasons with the config entry they come from; grouped by what they say.
_WHERE = re.compile(r"\s*\([^()]*\.ya?ml(?::\d+){0,2}\)$")


def collect(ctx: RunContext, store: RunStore, state: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the report says, as plain data."""
    stage = "refine" if state.get("executed") else "bucket"
    files = list(state.get("files", []))
    per_file: dict[str, dict[str, int]] = {}
    review: list[dict[str, Any]] = []
    fallbacks: list[dict[str, Any]] = []  # decided offline instead of by the LLM (rails, budget, endpoint)
    brains: Counter[str] = Counter()
    overruled: list[str] = []  # probe-based predictions the draft's execution changed
    for rel in files:
        decisions = store.read_decisions(stage, rel) or []
        if stage == "refine":
            overruled += [str(TestKey.of(rel, d.test)) for d in overturned(store.read_decisions("bucket", rel) or [], decisions)]
        per_file[rel] = {m: n for m, n in Counter(d.mode for d in decisions).items()}
        brains.update(d.brain for d in decisions)
        review += [{"file": rel, "test": d.test, "mode": d.mode, "reason": d.reason, "missing": list(d.missing)}
                   for d in decisions if d.needs_review]
        fallbacks += [{"file": rel, "test": d.test, "mode": d.mode, "reason": d.reason}
                      for d in decisions if "->" in d.brain]
    configs = _config_entries(ctx, files)
    if configs:  # what the configs say, human edits included
        per_file = {rel: dict(Counter(mode for _, mode, _ in entries)) for rel, entries in configs.items()}
    totals: Counter[str] = Counter()
    for counts in per_file.values():
        totals.update(counts)
    scope = store.read_scope() or []
    scope_fallbacks = [{"file": d.path, "test": None, "mode": "keep" if d.keep else "drop", "reason": d.reason}
                       for d in scope if "->" in d.brain]
    verify_records = _records(store.path("verify", "results.jsonl"))
    memory = store.read_json("memory.json", {})
    # A file that does not import is skipped as a whole and marked NEEDS REVIEW in its config:
    # counted with the rest, so the summary's number is the sections' below.
    review += [{"file": rel, "test": None, "mode": "skip", "missing": ["a file that imports on this torch"],
                "reason": f"the whole file is skipped: it does not import ({error})"}
               for rel, error in sorted(((memory or {}).get("import_errors") or {}).items())]
    return {
        "backend": ctx.profile.name, "device": ctx.device, "torch_root": str(ctx.torch_root),
        "run": run_identity(ctx.torch_root), "decided_by": stage, "totals": {m: totals.get(m, 0) for m in MODES},
        "per_file": per_file, "configs": {rel: _config_link(ctx, rel) for rel in files},
        "held_back": held_back(configs), "held_back_instances": instance_reasons(verify_records),
        "scope": [{"path": d.path, "keep": d.keep, "reason": d.reason} for d in scope],
        "needs_review": review, "llm_fallbacks": fallbacks + scope_fallbacks, "brains": dict(brains),
        "usage": ctx.brain.usage.as_dict(), "timings_s": ordered_timings(store.read_json("timings.json", {})),
        "memory": memory, "probe": store.read_json("probe.json"),
        "probe_overturned": sorted(overruled),
        "emit": store.read_json("emit.json", {}),
        "verify": store.read_json("verify.json"),
        "judge": store.read_json("judge.json"),
        "reason_check": store.read_json("reason_check.json"),
        **brain_report.sections(ctx, store, state),  # "llm" and "eval"
    }


# --- what the run was ---------------------------------------------------------------------------
def run_identity(torch_root: Path) -> dict[str, Any]:
    """torch version, upstream revision, date; command and exit code come at the end."""
    return {"torch_version": torch_version(), "upstream_revision": upstream_revision(torch_root),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "command": None, "exit_code": None}


def exit_code(data: Mapping[str, Any]) -> int:
    """0: the curated suite held (or was not run); 1: a mandatory failure, in the standing
    configs judged at the run's start (a regression, flaky or after an upstream change: the
    night did not hold, whatever regeneration proposes) or in the verification of tonight's
    configs (a strict unexpected pass there fails as one; in the judge it is a fix, which
    regeneration promotes); 3: either run could not be trusted (runner/verdict.py)."""
    judge, verify = data.get("judge") or {}, data.get("verify") or {}
    if judge.get("infrastructure") or verify.get("infrastructure"):
        return 3
    return 1 if regressed(judge) or verify.get("mandatory_failures") else 0


# --- what is held back, and why -----------------------------------------------------------------
def _config_entries(ctx: RunContext, files: Iterable[str]) -> dict[str, list[tuple[str, str, str]]]:
    """(test, mode, reason) of every named test in each file's emitted config."""
    from testcurator.config.loader import load_config
    from testcurator.config.layout import config_path

    out: dict[str, list[tuple[str, str, str]]] = {}
    for rel in files:
        path = config_path(ctx.configs_dir, rel)
        if path.exists():
            loaded = load_config(path, torch_root=ctx.torch_root)
            out[rel] = [(name, e.mode, e.reason or "(no reason written)") for f in loaded.files for e in f.entries
                        for name in e.names]
    return out


def _config_link(ctx: RunContext, rel: str) -> str | None:
    from testcurator.pipelines.emit import config_path

    path = config_path(ctx.configs_dir, rel)
    return os.path.relpath(path, ctx.out_dir) if path.exists() else None


def held_back(configs: Mapping[str, Sequence[tuple[str, str, str]]]) -> dict[str, list[dict[str, Any]]]:
    """Per held-back mode, the reasons with their tests, the most common reason first."""
    groups: dict[str, dict[str, list[str]]] = {m: defaultdict(list) for m in HELD_BACK_MODES}
    for rel, entries in configs.items():
        for test, mode, reason in entries:
            if mode in groups:
                groups[mode][reason].append(str(TestKey.of(rel, test)))
    return {mode: _ranked(by_reason) for mode, by_reason in groups.items() if by_reason}


def instance_reasons(records: Sequence[TestRecord]) -> dict[str, list[dict[str, Any]]]:
    """Skipped and xfailed instances of the verification run, grouped by pytest's reason."""
    groups: dict[str, dict[str, list[str]]] = {"skipped": defaultdict(list), "xfailed": defaultdict(list)}
    for record in records:
        if record.outcome in groups:
            reason = _WHERE.sub("", outcome_reason(record)) or "(no reason given)"
            groups[record.outcome][reason].append(record.nodeid)
    return {outcome: _ranked(by_reason) for outcome, by_reason in groups.items() if by_reason}


def outcome_reason(record: TestRecord) -> str:
    """Why a test ended as it did, on one line: the classifier's evidence, else a skip's or
    xfail's reason, else the first error line (``E   ...``) of pytest's report, else its last line."""
    if record.evidence:
        return record.evidence.strip().splitlines()[0]
    text = record.failure_text if record.outcome != "passed" else None
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return ""
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    if errors:
        return errors[0]
    if len(lines) > 1 and lines[0].startswith("self = <"):  # a traceback whose error line was cut
        return lines[-1]
    return lines[0].removeprefix("Skipped: ")


def _ranked(by_reason: Mapping[str, list[str]]) -> list[dict[str, Any]]:
    rows = [{"reason": reason, "count": len(tests), "tests": sorted(tests)} for reason, tests in by_reason.items()]
    return sorted(rows, key=lambda r: (-r["count"], r["reason"]))


def _records(path: Path) -> list[TestRecord]:
    return read_jsonl(path) if path.is_file() else []


def write_report(ctx: RunContext, store: RunStore, state: Mapping[str, Any]) -> Path:
    """The report of a finished run; the run is recorded in the history of runs on the way
    (pipelines/nights/night.py), after "since the previous run" is read from it."""
    from testcurator.pipelines.nights.night import close_night

    from testcurator.pipelines.gaps.files import report_section

    data = collect(ctx, store, state)
    data["gaps_section"] = report_section(store.root, ctx.out_dir)  # writes gaps.md/.html/.json beside
    data["since"] = close_night(ctx, store, list(state.get("kept", state.get("files", []))), exit_code(data),
                                len((data.get("emit") or {}).get("pending") or []))
    return _write(ctx.out_dir, data)


def _write(out_dir: Path, data: Mapping[str, Any]) -> Path:
    atomic_write_text(out_dir / "report.json", json.dumps(data, indent=1, sort_keys=True) + "\n")
    path = out_dir / "report.md"
    atomic_write_text(path, markdown(data))
    return path


def finish_report(out_dir: Path, command: str) -> int:
    """Record the command and its exit code in the report in ``out_dir``; returns the code."""
    path = out_dir / "report.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    code = exit_code(data)
    data.setdefault("run", {}).update(command=command, exit_code=code)
    _write(out_dir, data)
    return code
