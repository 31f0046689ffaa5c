"""The review as one self-contained HTML page (inline CSS and a few lines of JS; nothing
fetched from anywhere), read in a browser at a glance:

- the headline and, on red, every test that loses ``mandatory_success``; on yellow, modes
  that changed under an unchanged reason;
- a legend for every colour and mark the page uses;
- per file, one row per test: the mark, the name (it wraps at ``::`` and ``_``, never
  mid-word, never cut), the mode transition, edits as ``+added`` / ``-removed`` chips that
  never break inside, the reason, and links to the config lines;
- "Config lines": the entry and its comment, as written on each side, with line numbers;
  every evidence link jumps there and highlights it.

Its words (marks, the arrow, the phrases of a change) are ``review_words.py``'s, the same
as every other rendering's; :func:`testcurator.config.review_render.render` calls
:func:`to_html` for ``--format html``.
"""

from __future__ import annotations

import html
import re

from testcurator.config.review import ReviewReport, TestChange, by_cause
from testcurator.config.review_words import (ARROW, KIND_MARK, LOST, NO_REASON, STALE, arrow, change_item, edit_parts,
                                             file_kind, headline, transition, what)

_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1280px;padding:0 1em;color:#1f2328}
h1{font-size:1.35em;margin:0 0 .3em}h2{font-size:1.1em;margin-top:1.6em}code{font:12.5px ui-monospace,monospace}
.headline{font-size:1.15em;font-weight:600;margin:.2em 0 1em}.headline.bad{color:#cf222e}
.banner{padding:8px 12px;margin:.6em 0;border-left:6px solid}.banner ul{margin:.3em 0;padding-left:1.4em}
.banner.lost{background:#ffebe9;border-color:#cf222e}.banner.stale{background:#fff8c5;border-color:#bf8700}
.legend{display:flex;flex-wrap:wrap;gap:.4em 1.4em;font-size:12.5px;margin:.8em 0;padding:6px 10px;border:1px solid #d0d7de;background:#f6f8fa}
.legend span{white-space:nowrap}.sw{display:inline-block;width:14px;height:14px;vertical-align:-2px;margin-right:4px;border:1px solid #d0d7de}
table{border-collapse:collapse;margin:.5em 0;width:100%}th,td{border:1px solid #d0d7de;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.n{text-align:right}td.mark{width:2.2em;white-space:nowrap;font-weight:700}
table.tests td.name{width:28%}table.tests td.name code{overflow-wrap:normal;word-break:normal}
tr.added td.mark{border-left:5px solid #1a7f37;color:#1a7f37}tr.removed td.mark{border-left:5px solid #cf222e;color:#cf222e}
tr.changed td.mark{border-left:5px solid #9a6700;color:#9a6700}tr.lost td{background:#ffebe9}tr.lost td.mark{color:#cf222e}
tr td.stale{background:#fff8c5}table.counts{width:auto;min-width:24em}.chip{display:inline-block;white-space:nowrap;margin:1px 4px 1px 0;padding:0 5px;border-radius:3px;font:12px ui-monospace,monospace}
.chip.add{background:#dafbe1;color:#116329}.chip.del{background:#ffebe9;color:#a40e26}.chip.same{background:#eaeef2}
.scroll{overflow-x:auto}.note{background:#fff8c5;padding:6px 10px}#filter{margin:1em 0;padding:4px;width:24em}
figure{margin:.8em 0;border:1px solid #d0d7de}figure:target{outline:3px solid #0969da}figcaption{background:#f6f8fa;padding:3px 8px;font-size:12.5px}
pre{margin:0;padding:4px 0;overflow-x:auto}pre span{display:block;padding:0 8px;white-space:pre}pre span.hit{background:#fff8c5}
pre i{display:inline-block;width:4em;color:#656d76;font-style:normal;user-select:none}"""
_JS = """function f(){var q=document.getElementById('filter').value.toLowerCase();
document.querySelectorAll('tr.t').forEach(function(r){r.style.display=r.textContent.toLowerCase().indexOf(q)<0?'none':''})}"""
_LEGEND = [
    '<span class="sw" style="border-left:5px solid #1a7f37"></span>+ added test',
    '<span class="sw" style="border-left:5px solid #cf222e"></span>- removed test',
    '<span class="sw" style="border-left:5px solid #9a6700"></span>~ changed test',
    f'<span class="sw" style="background:#ffebe9"></span>{LOST} loses mandatory_success',
    f'<span class="sw" style="background:#fff8c5"></span>{STALE} mode changed, reason did not',
    '<span class="chip add">+edit</span> edit added',
    '<span class="chip del">-edit</span> edit removed',
    '<span class="chip same">edit</span> edit unchanged',
]


def _e(text: str | None) -> str:
    return html.escape(text or "", quote=True)


def _name(name: str) -> str:
    """Escaped, with break opportunities after ``::`` and ``_`` (wrapping never cuts a word)."""
    return _e(name).replace("::", "::<wbr>").replace("_", "_<wbr>")


def anchor(side: str, where: str) -> str:
    return f"{side}-" + re.sub(r"[^A-Za-z0-9]+", "-", where).strip("-")


def _evidence(t: TestChange) -> str:
    links = [f'<a href="#{anchor(side, where)}">{side} {_e(where)}</a>'
             for side, where in (("new", t.new_where), ("old", t.old_where)) if where]
    return "<br>".join(links)


def _edits(t: TestChange) -> str:
    chips = []
    for part in edit_parts(t):
        cls = "add" if part.startswith("+") else "del" if part.startswith("-") else "same"
        chips.append(f'<span class="chip {cls}">{_e(part)}</span>')
    return " ".join(chips)


def _reason(t: TestChange) -> tuple[str, str]:
    if t.kind == "removed":
        return ' class="reason"', _e(t.old_reason)
    if t.stale_reason:
        return ' class="reason stale"', f"{STALE} unchanged although the mode changed: {_e(t.new_reason)}"
    if "reason" in t.aspects:
        return ' class="reason"', f"{_e(t.new_reason or NO_REASON)}<br><small>was: {_e(t.old_reason or NO_REASON)}</small>"
    return ' class="reason"', _e(t.new_reason)


def _row(t: TestChange) -> str:
    cls = f"t {t.kind}" + (" lost" if t.lost_mandatory else "")
    mark = KIND_MARK[t.kind] + (f" {LOST}" if t.lost_mandatory else "") + (f" {STALE}" if t.stale_reason else "")
    reason_attr, reason_html = _reason(t)
    return (f'<tr class="{cls}"><td class="mark">{_e(mark)}</td><td class="name"><code>{_name(t.name)}</code></td>'
            f"<td>{_e(what(t))}</td><td>{_e(arrow(t))}</td><td>{_edits(t)}</td><td{reason_attr}>{reason_html}</td>"
            f"<td>{_evidence(t)}</td></tr>")


def _banners(report: ReviewReport) -> list[str]:
    s, out = report.summary, []
    if s.lost_tests:
        items = "".join(f"<li><code>{_name(n)}</code></li>" for n in s.lost_tests)
        out.append(f'<div class="banner lost"><strong>{LOST} mandatory_success lost: {s.mandatory_lost} of '
                   f"{s.mandatory_before}</strong><ul>{items}</ul></div>")
    stale = [f"{f.raw_path}::{t.name}" for f in report.files for t in f.tests if t.stale_reason]
    if stale:
        items = "".join(f"<li><code>{_name(n)}</code></li>" for n in stale)
        out.append(f'<div class="banner stale"><strong>{STALE} mode changed, reason did not: {len(stale)}</strong>'
                   f"<ul>{items}</ul></div>")
    return out


def _excerpts(report: ReviewReport) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for f in report.files:
        for t in f.tests:
            for side, where, lines, label in (("new", t.new_where, t.new_excerpt, report.new_label),
                                              ("old", t.old_where, t.old_excerpt, report.old_label)):
                if not where or not lines or anchor(side, where) in seen:
                    continue
                seen.add(anchor(side, where))
                hit = int(where.rsplit(":", 1)[1]) if where.rsplit(":", 1)[-1].isdigit() else -1
                body = "".join(f'<span{" class=hit" if n == hit else ""}><i>{n}</i>{_e(text)}</span>' for n, text in lines)
                out.append(f'<figure id="{anchor(side, where)}"><figcaption>{side}: <code>{_e(where)}</code> '
                           f"({_e(label)})</figcaption><pre>{body}</pre></figure>")
    return out


def to_html(report: ReviewReport) -> str:
    s = report.summary
    title = f"testcurator config review: {report.old_label} {ARROW} {report.new_label}"
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{_e(title)}</title>",
           f"<style>{_CSS}</style><script>{_JS}</script></head><body>", f"<h1>{_e(title)}</h1>",
           f'<p class="headline{" bad" if s.mandatory_lost else ""}">{_e(headline(report))}</p>', *_banners(report),
           '<div class="legend" id="legend"><strong>Legend</strong>'
           + "".join(f"<span>{item}</span>" for item in _LEGEND) + "</div>",
           '<table class="counts"><tr><th>mode</th><th>old</th><th>new</th><th>Δ</th></tr>']
    out += [f'<tr><td>{m}</td><td class="n">{s.old_counts[m]}</td><td class="n">{s.new_counts[m]}</td>'
            f'<td class="n">{s.new_counts[m] - s.old_counts[m]:+d}</td></tr>' for m in s.old_counts]
    out.append("</table>")
    if s.transitions:
        out.append("<h2>Transitions</h2><ul>" + "".join(f"<li>{_e(transition(k))}: {v}</li>" for k, v in s.transitions.items()) + "</ul>")
    if report.causes:
        out.append("<h2>By cause</h2><ul>" + "".join(f"<li>{_e(cause)} ({len(tests)}): "
                                                     + ", ".join(f"<code>{_e(t)}</code>" for t in tests) + "</li>"
                                                     for cause, tests in by_cause(report)) + "</ul>")
    if report.global_changes:
        out.append("<h2>Global</h2><ul>" + "".join(f"<li>{_e(change_item(c))}</li>" for c in report.global_changes) + "</ul>")
    out += [f'<p class="note">{STALE} {_e(n)}</p>' for n in report.notes]
    out.append('<input id="filter" placeholder="filter tests (name, mode, reason)" oninput="f()">')
    for f in report.files:
        out.append(f"<h2><code>{_e(f.raw_path)}</code>: {_e(file_kind(f))}</h2>")
        out += [f"<p>{_e(change_item(c))} (capability)</p>" for c in f.capabilities]
        if f.tests:
            out.append('<div class="scroll"><table class="tests"><tr><th></th><th>test</th><th>change</th><th>mode</th><th>edits</th>'
                       "<th>reason</th><th>config</th></tr>")
            out += [_row(t) for t in f.tests]
            out.append("</table></div>")  # a narrow window scrolls the table, the page stays put
    excerpts = _excerpts(report)
    if excerpts:
        out += ["<h2>Config lines</h2>", *excerpts]
    if report.empty:
        out.append("<p>No changes.</p>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
