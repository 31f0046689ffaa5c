"""Renderings of a :class:`~testcurator.config.review.ReviewReport`.

Markdown (a PR comment), one self-contained HTML page (``review_html.py``), the terminal
(rich) and JSON. Each is a pure function of the report, so the same report renders to the
same bytes. Every rendering leads with what a reviewer must see first: how many tests lose
``mandatory_success`` and which, and modes that changed under an unchanged reason; then a
legend; then per file and test what changed, edits as ``+added`` / ``-removed`` items, and
where each entry is written. Test names are never cut: they wrap at ``::``, ``/`` and ``_``
(``config/wrap.py``). What each change says (marks, the one arrow ``->``, the phrases) is
``review_words.py``'s, shared with the HTML page; :func:`render` picks the format, so this
module imports ``review_html.py`` and never the other way.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict

from rich.console import Console
from rich.table import Table
from rich.text import Text

from testcurator.config.review import ReviewReport, TestChange, by_cause
from testcurator.config.review_html import to_html
from testcurator.config.review_words import (ARROW, KIND_MARK, LEGEND, LOST, STALE, arrow, change_item, edit_parts,
                                             evidence, file_heading, file_kind, headline, lost_list, marks, reason,
                                             stale_list, transition, what)
from testcurator.config.wrap import Wrapped

FORMATS = ("terminal", "markdown", "html", "json")


# --- markdown -------------------------------------------------------------------------------
def _md(text: str) -> str:
    """Prose in a markdown table cell or line: ``|`` escaped, ``<`` kept from opening a tag,
    ``&`` from starting an entity; nothing else escaped (``->`` stays ``->``)."""
    text = re.sub(r"&(?=#?\w+;)", "&amp;", text).replace("<", "&lt;")
    return text.replace("|", "\\|").replace("\n", "<br>")


def _code(text: str) -> str:
    """``text`` as a code span (shown verbatim: no entities inside), safe in a table cell."""
    text = text.replace("\n", " ").replace("|", "\\|")
    ticks = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def to_markdown(report: ReviewReport) -> str:
    s = report.summary
    out = [f"## testcurator config review: {_code(report.old_label)} {ARROW} {_code(report.new_label)}", "",
           f"**{_md(headline(report))}**", ""]
    if s.lost_tests:
        out += [f"> {LOST} **mandatory_success lost ({s.mandatory_lost})**: "
                + ", ".join(_code(n) if not n.startswith("...") else n for n in lost_list(report)), ">"]
    if s.stale_reasons:
        out += [f"> {STALE} **mode changed, reason did not ({s.stale_reasons})**: "
                + ", ".join(_code(n) if not n.startswith("...") else n for n in stale_list(report)), ">"]
    if out[-1] == ">":
        out[-1] = ""
    out += [f"<sub>Legend: {_md(LEGEND)}</sub>", ""]
    out += ["| mode | old | new | Δ |", "|---|---:|---:|---:|"]
    out += [f"| {m} | {s.old_counts[m]} | {s.new_counts[m]} | {s.new_counts[m] - s.old_counts[m]:+d} |" for m in s.old_counts]
    if s.transitions:
        out += ["", "**Transitions**", ""] + [f"- {_md(transition(k))}: {v}" for k, v in s.transitions.items()]
    if report.causes:
        out += ["", "**By cause** (what changed between the runs that wrote the two sides)", ""]
        out += [f"- {_md(cause)} ({len(tests)}): " + ", ".join(_code(t) for t in tests) for cause, tests in by_cause(report)]
    if report.global_changes:
        out += ["", "**Global**", ""] + [f"- {_md(change_item(c))}" for c in report.global_changes]
    out += [f"\n> {STALE} {_md(n)}" for n in report.notes]
    for f in report.files:
        out += ["", f"### {_code(f.raw_path)}: {_md(file_kind(f))}", ""]
        out += [f"- {_md(change_item(c))} (capability)" for c in f.capabilities]
        if f.tests:
            out += ["<details open><summary>" + f"{len(f.tests)} test(s)</summary>", "",
                    "| | test | change | mode | edits | reason | config |", "|---|---|---|---|---|---|---|"]
            out += [f"| {KIND_MARK[t.kind]}{marks(t)} | {_code(t.name)} | {what(t)} | {_md(arrow(t))} | "
                    f"{'<br>'.join(_code(e) for e in edit_parts(t))} | {_md(reason(t))} | {_md(evidence(t))} |"
                    for t in f.tests]
            out += ["", "</details>"]
    if report.empty:
        out += ["", "No changes."]
    return "\n".join(out) + "\n"


# --- terminal -------------------------------------------------------------------------------
def render_terminal(report: ReviewReport, console: Console) -> None:
    """One block per test, values in a hanging-indent column: a long name wraps there at its
    ``::``, ``/`` and ``_`` (never mid-word, never cut)."""
    s = report.summary
    console.print(Wrapped(Text.assemble(("config review ", "bold"), f"{report.old_label} {ARROW} {report.new_label}")))
    console.print(Wrapped(Text(headline(report), style="bold red" if s.mandatory_lost else "bold")))
    for mark, title, names, style in ((LOST, f"mandatory_success lost ({s.mandatory_lost})", lost_list(report), "red"),
                                      (STALE, f"mode changed, reason did not ({s.stale_reasons})", stale_list(report),
                                       "yellow")):
        if names:
            console.print(_grid([(mark, Text(title, style=f"bold {style}"))] + [("", Text(n, style=style)) for n in names]))
    console.print(_grid([("", Text(f"legend: {LEGEND}", style="dim"))]))
    counts = Table("mode", "old", "new", "Δ", title="listed tests by mode", title_justify="left")
    for m in s.old_counts:
        counts.add_row(m, str(s.old_counts[m]), str(s.new_counts[m]), f"{s.new_counts[m] - s.old_counts[m]:+d}")
    console.print(counts)
    for line in [*(f"transition {transition(k)}: {v}" for k, v in s.transitions.items()),
                 *(f"cause {cause} ({len(tests)}): {', '.join(tests)}" for cause, tests in by_cause(report)),
                 *(change_item(c) for c in report.global_changes), *report.notes]:
        console.print(Wrapped(line))
    for f in report.files:
        console.print()
        console.print(Wrapped(Text(file_heading(f), style="bold")))
        for c in f.capabilities:
            console.print(_grid([("", Text(f"{change_item(c)} (capability)"))]))
        for t in f.tests:
            console.print(_test_grid(t))


def _grid(rows: list[tuple[str, Text]], label_width: int = 0) -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=2, no_wrap=True)
    grid.add_column()
    for mark, value in rows:
        grid.add_row(Text(mark), Wrapped(value))
    return grid


def _test_grid(t: TestChange) -> Table:
    style = "bold red" if t.lost_mandatory else {"added": "green", "removed": "red"}.get(t.kind, "")
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=3, no_wrap=True)
    grid.add_column(width=6, no_wrap=True)
    grid.add_column()
    grid.add_row(Text(f" {KIND_MARK[t.kind]}", style), Text("test", "dim"),
                 Wrapped(Text.assemble((t.name, style or "bold"), "  ", arrow(t),
                                       (f"  {marks(t)}" if marks(t) else "", "bold red"))))
    rows = [("change", what(t)), ("edits", "  ".join(edit_parts(t))), ("reason", reason(t)), ("config", evidence(t))]
    for label, value in rows:
        if value:
            grid.add_row("", Text(label, "dim"), Wrapped(Text(value, "yellow" if label == "reason" and t.stale_reason else "")))
    return grid


# --- json and dispatch ----------------------------------------------------------------------
def to_json(report: ReviewReport) -> str:
    return json.dumps(asdict(report), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


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
