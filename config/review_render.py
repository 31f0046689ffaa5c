"""Renderings of a :class:`~testcurator.config.review.ReviewReport`.

Markdown (a PR comment), one self-contained HTML page (inline CSS and a few lines of
inline JS to filter rows; no external resource), rich on the terminal, and JSON. Each is a
pure function of the report, so the same report renders to the same bytes.
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from testcurator.config.review import FileChange, ReviewReport, TestChange

FORMATS = ("terminal", "markdown", "html", "json")


def _arrow(t: TestChange) -> str:
    old = t.old_mode or f"unlisted ({t.old_effective})"
    new = t.new_mode or f"unlisted ({t.new_effective})"
    return old if old == new else f"{old} → {new}"


def _what(t: TestChange) -> str:
    return t.kind if t.kind != "changed" else "changed: " + ", ".join(t.aspects)


def _reason(t: TestChange) -> str:
    if t.kind == "removed":
        return t.old_reason or ""
    if "reason" in t.aspects:
        return f"{t.new_reason or '(none)'} (was: {t.old_reason or '(none)'})"
    return t.new_reason or ""


def _edits(t: TestChange) -> str:
    if t.old_edits == t.new_edits:
        return t.new_edits or ""
    return f"{t.old_edits or '(none)'} → {t.new_edits or '(none)'}"


def _evidence(t: TestChange) -> str:
    return " / ".join(x for x in (f"old {t.old_where}" if t.old_where else "", f"new {t.new_where}" if t.new_where else "") if x)


def summary_lines(report: ReviewReport) -> list[str]:
    s = report.summary
    return [f"{s.added} added, {s.removed} removed, {s.changed} changed test(s) in {len(report.files)} file(s); "
            f"mandatory_success lost {s.mandatory_lost} of {s.mandatory_before}"]


# --- markdown -------------------------------------------------------------------------------
def _md(text: str) -> str:
    return html.escape(text, quote=False).replace("|", "\\|").replace("\n", "<br>")


def _file_heading(f: FileChange) -> str:
    extra = f" (unlisted_test_mode {f.old_unlisted} → {f.new_unlisted})" if f.old_unlisted != f.new_unlisted else ""
    return f"`{f.raw_path}`: {f.kind}{extra}"


def to_markdown(report: ReviewReport) -> str:
    s = report.summary
    out = [f"## testcurator config review: `{report.old_label}` → `{report.new_label}`", "", *summary_lines(report), ""]
    out += ["| mode | old | new | Δ |", "|---|---:|---:|---:|"]
    out += [f"| {m} | {s.old_counts[m]} | {s.new_counts[m]} | {s.new_counts[m] - s.old_counts[m]:+d} |" for m in s.old_counts]
    if s.transitions:
        out += ["", "**Transitions**", ""] + [f"- {k}: {v}" for k, v in s.transitions.items()]
    if report.global_changes:
        out += ["", "**Global**", ""] + [f"- {_md(c)}" for c in report.global_changes]
    out += [f"\n> ⚠ {_md(n)}" for n in report.notes]
    for f in report.files:
        out += ["", f"### {_file_heading(f)}", ""]
        out += [f"- capability {_md(c)}" for c in f.capabilities]
        if f.tests:
            out += ["<details open><summary>" + f"{len(f.tests)} test(s)</summary>", "",
                    "| test | change | mode | edits | reason | evidence |", "|---|---|---|---|---|---|"]
            out += [f"| `{t.name}` | {_what(t)} | {_arrow(t)} | {_md(_edits(t))} | {_md(_reason(t))} | {_evidence(t)} |"
                    for t in f.tests]
            out += ["", "</details>"]
    if report.empty:
        out += ["", "No changes."]
    return "\n".join(out) + "\n"


# --- html -----------------------------------------------------------------------------------
_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#1f2328}
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}code{font:12px ui-monospace,monospace}
table{border-collapse:collapse;margin:.5em 0;width:100%}th,td{border:1px solid #d0d7de;padding:4px 8px;
text-align:left;vertical-align:top}th{background:#f6f8fa}td.n{text-align:right}
tr.added td:first-child{border-left:4px solid #1a7f37}tr.removed td:first-child{border-left:4px solid #cf222e}
tr.changed td:first-child{border-left:4px solid #9a6700}.note{background:#fff8c5;padding:6px 10px}
#filter{margin:1em 0;padding:4px;width:24em}"""
_JS = """function f(){var q=document.getElementById('filter').value.toLowerCase();
document.querySelectorAll('tr.t').forEach(function(r){r.style.display=r.textContent.toLowerCase().indexOf(q)<0?'none':''})}"""


def _e(text: str | None) -> str:
    return html.escape(text or "", quote=True)


def to_html(report: ReviewReport) -> str:
    s = report.summary
    title = f"testcurator config review: {report.old_label} → {report.new_label}"
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{_e(title)}</title>",
           f"<style>{_CSS}</style><script>{_JS}</script></head><body>", f"<h1>{_e(title)}</h1>",
           f"<p>{_e(summary_lines(report)[0])}</p>", "<table><tr><th>mode</th><th>old</th><th>new</th><th>Δ</th></tr>"]
    out += [f'<tr><td>{m}</td><td class="n">{s.old_counts[m]}</td><td class="n">{s.new_counts[m]}</td>'
            f'<td class="n">{s.new_counts[m] - s.old_counts[m]:+d}</td></tr>' for m in s.old_counts]
    out.append("</table>")
    if s.transitions:
        out.append("<h2>Transitions</h2><ul>" + "".join(f"<li>{_e(k)}: {v}</li>" for k, v in s.transitions.items()) + "</ul>")
    if report.global_changes:
        out.append("<h2>Global</h2><ul>" + "".join(f"<li>{_e(c)}</li>" for c in report.global_changes) + "</ul>")
    out += [f'<p class="note">{_e(n)}</p>' for n in report.notes]
    out.append('<input id="filter" placeholder="filter tests (name, mode, reason)" oninput="f()">')
    for f in report.files:
        out.append(f"<h2><code>{_e(f.raw_path)}</code>: {_e(_file_heading(f).split(': ', 1)[1])}</h2>")
        out += [f"<p>capability {_e(c)}</p>" for c in f.capabilities]
        if f.tests:
            out.append("<table><tr><th>test</th><th>change</th><th>mode</th><th>edits</th><th>reason</th><th>evidence</th></tr>")
            out += [f'<tr class="t {t.kind}"><td><code>{_e(t.name)}</code></td><td>{_e(_what(t))}</td><td>{_e(_arrow(t))}</td>'
                    f"<td>{_e(_edits(t))}</td><td>{_e(_reason(t))}</td><td>{_e(_evidence(t))}</td></tr>" for t in f.tests]
            out.append("</table>")
    if report.empty:
        out.append("<p>No changes.</p>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


# --- json and terminal ----------------------------------------------------------------------
def to_json(report: ReviewReport) -> str:
    return json.dumps(asdict(report), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def render_terminal(report: ReviewReport, console: Console) -> None:
    s = report.summary
    console.print(f"[bold]config review[/bold] {escape(report.old_label)} → {escape(report.new_label)}", highlight=False)
    console.print(summary_lines(report)[0], highlight=False, markup=False)
    counts = Table("mode", "old", "new", "Δ", title="listed tests by mode")
    for m in s.old_counts:
        counts.add_row(m, str(s.old_counts[m]), str(s.new_counts[m]), f"{s.new_counts[m] - s.old_counts[m]:+d}")
    console.print(counts)
    for line in [*(f"transition {k}: {v}" for k, v in s.transitions.items()), *report.global_changes, *report.notes]:
        console.print(line, highlight=False, markup=False)
    for f in report.files:
        table = Table("test", "change", "mode", "edits", "reason", "evidence", title=escape(_file_heading(f)), title_justify="left")
        for t in f.tests:
            table.add_row(*(escape(x) for x in (t.name, _what(t), _arrow(t), _edits(t), _reason(t), _evidence(t))))
        for c in f.capabilities:
            console.print(f"{f.raw_path}: capability {c}", highlight=False, markup=False)
        console.print(table)


def render(report: ReviewReport, fmt: str, *, width: int = 160) -> str:
    """``report`` in ``fmt`` as text (terminal: plain text, as rich would lay it out)."""
    if fmt == "markdown":
        return to_markdown(report)
    if fmt == "html":
        return to_html(report)
    if fmt == "json":
        return to_json(report)
    if fmt == "terminal":
        console = Console(record=True, width=width, file=_Null(), color_system=None)
        render_terminal(report, console)
        return console.export_text()
    raise ValueError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")


class _Null:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        return None
