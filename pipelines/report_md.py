"""report.md: the run report as a person reads it, rendered from report.json's data.

A pure function of the data (:func:`markdown`), so ``testcurator report`` renders a finished
run again exactly as the run did. It opens with the verdict, then "since the previous run"
(pipelines/nights/since.py), then this run's counts and identity, then the detail: per file,
what is held back and why, what to implement next (the gap board), the op capture, the
probe, scope, contradicted reasons, review items, LLM fallbacks, human edits, the
verification run, the brains, and the time per stage in pipeline order.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

from testcurator.memory.capture_run import report_lines
from testcurator.pipelines import brain_report
from testcurator.vocab import HELD_BACK_MODES, MODES

STAGE_ORDER = ("judge", "scope", "memory", "probe", "bucket", "refine", "emit", "verify", "report")
EXAMPLES = 5  # tests named per reason in the markdown (report.json has them all)


def _kept_back(found: list[dict[str, Any]]) -> str:
    kept = sum(bool(c.get("kept_back")) for c in found)
    return f" ({kept} of them kept back for review: regressed or flaky tests' standing entries)" if kept else ""


def ordered_timings(timings: Mapping[str, float]) -> dict[str, float]:
    """Stage seconds in pipeline order (unknown stages after), then ``total``."""
    keys = [k for k in STAGE_ORDER if k in timings] + sorted(k for k in timings if k not in STAGE_ORDER and k != "total")
    out = {k: round(float(timings[k]), 3) for k in keys}
    out["total"] = round(sum(out.values()), 3)
    return out


def regressed(judge: Mapping[str, Any]) -> list[str]:
    """The judge's mandatory failures: its failures less the strict unexpected passes."""
    return sorted(set(judge.get("mandatory_failures") or []) - set(judge.get("strict_unexpected_passes") or []))


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
                f"; reasons contradicted by the results: {len(data['reason_check'])}"
                + _kept_back(data['reason_check']))]
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


def markdown(data: Mapping[str, Any]) -> str:
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
    if data.get("gaps_section"):
        lines += ["", *data["gaps_section"]]
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
