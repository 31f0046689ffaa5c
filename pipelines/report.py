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
import textwrap
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from testcurator.files import atomic_write_text
from testcurator.memory.capture_run import report_lines
from testcurator.pipelines import brain_report
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.nights.identity import upstream_revision
from testcurator.pipelines.probe import overturned
from testcurator.pipelines.store import RunStore
from testcurator.runner.results.records import TestRecord, read_jsonl
from testcurator.vocab import HELD_BACK_MODES, MODES, TestKey

STAGE_ORDER = ("judge", "scope", "memory", "probe", "bucket", "refine", "emit", "verify", "report")
EXAMPLES = 5  # tests named per reason in the markdown (report.json has them all)
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
    import torch

    return {"torch_version": str(torch.__version__), "upstream_revision": upstream_revision(torch_root),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "command": None, "exit_code": None}


def ordered_timings(timings: Mapping[str, float]) -> dict[str, float]:
    """Stage seconds in pipeline order (unknown stages after), then ``total``."""
    keys = [k for k in STAGE_ORDER if k in timings] + sorted(k for k in timings if k not in STAGE_ORDER and k != "total")
    out = {k: round(float(timings[k]), 3) for k in keys}
    out["total"] = round(sum(out.values()), 3)
    return out


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


def regressed(judge: Mapping[str, Any]) -> list[str]:
    """The judge's mandatory failures: its failures less the strict unexpected passes."""
    return sorted(set(judge.get("mandatory_failures") or []) - set(judge.get("strict_unexpected_passes") or []))


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


# --- markdown -----------------------------------------------------------------------------------
def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _summary(data: Mapping[str, Any]) -> list[str]:
    totals, run, verify = data["totals"], data.get("run") or {}, data.get("verify")
    code = run.get("exit_code")
    verdict = ("the curated suite held" if code == 0 and verify
               else "not verified on the device (no verification run): exit 0 says nothing about the device"
               if code == 0 else "the curated suite did NOT hold" if code == 1
               else "the curated suite could not be checked (infrastructure failure)" if code == 3
               else f"exit code {code}" if code is not None else "the command has not finished")
    judge = data.get("judge") or {}
    if judge.get("judged"):
        verdict += "; " + _judged(judge, data.get("since") or {})
    if verify:
        verdict += ("; verification run" + (" (the standing configs' run: tonight's configs are the same)"
                                           if verify.get("reused_judge") else "")
                    + f": {', '.join(f'{k} {v}' for k, v in verify['outcomes'].items())}, "
                    f"{len(verify['mandatory_failures'])} mandatory failure(s)")
    held = {m: sum(g["count"] for g in data.get("held_back", {}).get(m, [])) for m in HELD_BACK_MODES}
    top = [g for m in HELD_BACK_MODES for g in data.get("held_back", {}).get(m, [])[:1]]
    lines = [f"**{verdict}**", "",
             f"- {sum(totals.values())} tests decided ({data['decided_by']} stage): "
             + ", ".join(f"{m} {totals[m]}" for m in MODES),
             f"- held back: skip {held['skip']}, xfail {held['xfail']}, xfail_strict {held['xfail_strict']}"
             + (f"; most common reason: {_cell(top[0]['reason'])} ({top[0]['count']})" if top else ""),
             f"- needs review: {len(data['needs_review'])}; human edits contradicted by execution: "
             f"{len((data.get('emit') or {}).get('conflicts', []))}"
             + ("" if data.get("reason_check") is None else
                f"; reasons contradicted by the results: {len(data['reason_check'])}")]
    timings = data.get("timings_s") or {}
    lines += ["", "| run | |", "|---|---|",
              f"| torch | {run.get('torch_version', '?')} |",
              f"| upstream | `{_cell(data['torch_root'])}` at {_cell(run.get('upstream_revision', '?'))} |",
              f"| date | {run.get('date', '?')} |",
              f"| command | `{_cell(run.get('command') or '(not recorded: the command did not finish)')}` |",
              f"| exit code | {code if code is not None else '(not recorded)'} |",
              f"| time | {timings.get('total', 0)} s |"]
    if (data.get("since") or {}).get("chart"):
        lines.append(f"| history | [{data['since']['chart']}]({data['since']['chart']}): passing, held-back and failing "
                     "instances per run (`testcurator history`) |")
    return lines


def _judged(judge: Mapping[str, Any], since: Mapping[str, Any]) -> str:
    """The standing configs' verdict, with what their failures were."""
    if judge.get("infrastructure"):
        return "the standing configs could not be judged tonight (infrastructure failure)"
    failing = regressed(judge)
    if not failing:
        return f"the standing configs held tonight ({judge.get('tests', 0)} test(s) ran)"
    kinds = {k: len(since.get(k) or []) for k in ("regressions", "flaky_failures", "upstream_failures")}
    return (f"the standing configs did NOT hold tonight: {len(failing)} mandatory instance failure(s) in "
            f"{sum(kinds.values())} test(s): {kinds['regressions']} regressed, {kinds['flaky_failures']} flaky, "
            f"{kinds['upstream_failures']} after an upstream change")


WIDTH = 100  # report.md's prose wraps here; a name or path is never broken


def _item(text: str, bullet: str = "- ") -> list[str]:
    """``text`` as one markdown list item, wrapped at spaces (continuation lines indented)."""
    return textwrap.wrap(text, WIDTH, initial_indent=bullet, subsequent_indent=" " * len(bullet),
                         break_long_words=False, break_on_hyphens=False) or [bullet.rstrip()]


def _held_back_md(title: str, groups: Mapping[str, list[dict[str, Any]]], examples: int = EXAMPLES) -> list[str]:
    lines = ["", f"## {title}", ""]
    if not groups:
        return lines + ["- none"]
    for mode, rows in groups.items():
        lines += [f"### {mode} ({sum(r['count'] for r in rows)} in {len(rows)} reason(s))", ""]
        for row in rows:
            names = ", ".join(f"`{t}`" for t in row["tests"][:examples])
            more = f" and {row['count'] - examples} more" if row["count"] > examples else ""
            lines += _item(f"**{row['count']}**: {row['reason']}")
            lines += _item(f"e.g. {names}{more}", bullet="  ")
        lines.append("")
    return lines


def _review_name(item: Mapping[str, Any]) -> str:
    """``file::Class::test``, or the file alone for a decision about the whole file."""
    return f"{item['file']}::{item['test']}" if item.get("test") else item["file"]


def _markdown(data: Mapping[str, Any]) -> str:
    from testcurator.pipelines.nights import since

    summary, night = _summary(data), since.markdown(data.get("since"))
    lines = [f"# testcurator run: {data['backend']} ({data['device']})", "", summary[0], *night,
             *(["", "## This run"] if night else []), *summary[1:]]
    lines += ["", "## Per file", "", "| file | config | " + " | ".join(MODES) + " |", "|---|---|" + "---:|" * len(MODES)]
    for rel, counts in sorted(data["per_file"].items()):
        link = (data.get("configs") or {}).get(rel)
        config = f"[{_cell(link)}]({link})" if link else "(none written)"
        lines.append(f"| {rel} | {config} | " + " | ".join(str(counts.get(m, 0)) for m in MODES) + " |")
    broken = (data.get("memory") or {}).get("import_errors") or {}
    if broken:
        lines += ["", f"## Files that do not import ({len(broken)}): skipped as a whole, needs review", ""]
        lines += [f"- `{rel}`: {_cell(error)}" for rel, error in sorted(broken.items())]
    lines += _held_back_md("Held back by the configs, by reason", data.get("held_back", {}))
    if data.get("held_back_instances"):
        lines += _held_back_md("Skipped and xfailed in the verification run (instances), by reason",
                               data["held_back_instances"], examples=2)
    capture = report_lines((data.get("memory") or {}).get("capture") or {})
    if capture:
        lines += ["", "## Op capture on CPU", "", *capture]
    if data.get("probe"):
        p = data["probe"]
        lines += ["", "## Device probe", "", *_item(f"{p['calls']} distinct call(s) (op x dtypes): " + ", ".join(
            f"{k} {v}" for k, v in p["statuses"].items() if v) + f"; {p['replayed']} replayed in {p['seconds']}s, "
            f"{p['reused']} reused (backend {p['backend_version']}, torch {p['torch_version']}); "
            "`testcurator probe --backend ...` lists what the device lacks")]
        overruled = data.get("probe_overturned") or []
        lines += _item(f"predictions from it that the draft's execution overturned: {len(overruled)}"
                       + (" (" + ", ".join(f"`{_cell(t)}`" for t in overruled[:EXAMPLES])
                          + (f" and {len(overruled) - EXAMPLES} more" if len(overruled) > EXAMPLES else "") + ")"
                          if overruled else ""))
    lines += ["", "## Scope", ""] + [line for s in data["scope"]
                                     for line in _item(f"{'kept' if s['keep'] else 'dropped'} `{s['path']}`: {s['reason']}")]
    if data.get("reason_check"):
        from testcurator.pipelines.reason_check import Contradiction

        lines += ["", f"## Reasons the results contradict ({len(data['reason_check'])})", ""]
        lines += [line for c in data["reason_check"] for line in _item(_cell(Contradiction(**c).line()))]
    lines += ["", f"## Needs review ({len(data['needs_review'])})", ""]
    lines += [line for r in data["needs_review"] for line in _item(f"`{_review_name(r)}` ({r['mode']}): {r['reason']}")] \
        or ["- none"]
    fallbacks = data.get("llm_fallbacks", [])
    if fallbacks:
        lines += ["", f"## Decided by the offline brain instead of the LLM ({len(fallbacks)})", ""]
        lines += [line for f in fallbacks
                  for line in _item(f"`{f['file']}{'::' + f['test'] if f['test'] else ''}` ({f['mode']}): {f['reason']}")]
    emit = data.get("emit") or {}
    conflicts = emit.get("conflicts", [])
    lines += ["", f"## Human edits kept ({len(emit.get('kept_human', []))}), contradicted by execution ({len(conflicts)})", ""]
    lines += [line for c in conflicts for line in _item(f"`{c['file']}::{c['test']}`: human says {c['human_mode']}, "
                                                         f"execution says {c['evidence_mode']}: {c['reason']}")] \
        or ["- none contradicted"]
    verify = data.get("verify")
    if verify:
        lines += ["", "## Verification run of the curated suite", "",
                  "- outcomes: " + ", ".join(f"{k} {v}" for k, v in verify["outcomes"].items()),
                  f"- mandatory_success failures (and strict unexpected passes): {len(verify['mandatory_failures'])}"]
        lines += [f"  - `{n}`" for n in verify["mandatory_failures"][:50]]
        lines.append(f"- unexpected passes (xfail): {len(verify['unexpected_passes'])}")
        lines += [f"  - `{n}`" for n in verify["unexpected_passes"][:50]]
        infra = verify.get("infrastructure") or []
        lines.append(f"- infrastructure failures: {len(infra)}")
        lines += [f"  - {_cell(text)}" for text in infra]
    lines += ["", "## Brains and LLM usage", "", "- test decisions by brain (scope's file decisions not counted): " + ", ".join(f"{k} {v}" for k, v in sorted(data["brains"].items())),
              *(["- usage: " + ", ".join(f"{k} {v}" for k, v in sorted(data["usage"].items()))]
                if any(data["usage"].values()) else []), "",
              brain_report.markdown(data), "## Time per stage, in pipeline order", "", "| stage | s |", "|---|---:|"]
    # ordered again: report.json is written with sorted keys
    lines += [f"| {'**total**' if k == 'total' else k} | {v} |" for k, v in ordered_timings(data.get("timings_s") or {}).items()]
    return "\n".join(lines) + "\n"


def write_report(ctx: RunContext, store: RunStore, state: Mapping[str, Any]) -> Path:
    """The report of a finished run; the run is recorded in the history of runs on the way
    (pipelines/nights/night.py), after "since the previous run" is read from it."""
    from testcurator.pipelines.nights.night import close_night

    data = collect(ctx, store, state)
    data["since"] = close_night(ctx, store, list(state.get("kept", state.get("files", []))), exit_code(data),
                                len((data.get("emit") or {}).get("pending") or []))
    return _write(ctx.out_dir, data)


def _write(out_dir: Path, data: Mapping[str, Any]) -> Path:
    atomic_write_text(out_dir / "report.json", json.dumps(data, indent=1, sort_keys=True) + "\n")
    path = out_dir / "report.md"
    atomic_write_text(path, _markdown(data))
    return path


def finish_report(out_dir: Path, command: str) -> int:
    """Record the command and its exit code in the report in ``out_dir``; returns the code."""
    path = out_dir / "report.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    code = exit_code(data)
    data.setdefault("run", {}).update(command=command, exit_code=code)
    _write(out_dir, data)
    return code
