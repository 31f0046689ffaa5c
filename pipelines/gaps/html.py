"""The gap board as one static HTML page: the gaps, ranked, against the dtypes.

Each cell is coloured by the gap's status at that dtype and sized and labelled by the tests it
holds back there; hovering shows them, clicking a cell or a gap's name lists them with the
evidence and the ``enable-op`` command beside the grid. Everything is in the page (styles,
script, data): no server, no network.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

from testcurator.pipelines.gaps.board import STATUS_ORDER, STATUS_WORDS, Board, Gap, headline

COLOURS = {"crash": "#b2182b", "wrong_result": "#f4a582", "view_copy": "#8073ac", "missing_kernel": "#2166ac",
           "unsupported_dtype": "#92c5de", "error": "#878787"}
# Columns in the order a reader expects: floating, complex, integral, bool, the rest.
_DTYPE_ORDER = ("float64", "float32", "float16", "bfloat16", "complex128", "complex64", "complex32", "int64",
                "int32", "int16", "int8", "uint64", "uint32", "uint16", "uint8", "bool")
_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em;margin:0 0 .3em}
.legend span{display:inline-block;margin-right:1em}
.legend i{display:inline-block;width:.9em;height:.9em;margin-right:.3em;vertical-align:middle;border-radius:2px}
.wrap{display:flex;flex-wrap:wrap;gap:1.5em;align-items:flex-start}
table{border-collapse:collapse}
th,td{border:1px solid #ddd;padding:2px 4px;text-align:center}
th.dt{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:normal;font-size:12px}
td.name,td.status{text-align:left;white-space:nowrap}
td.name a{cursor:pointer;color:#124;text-decoration:underline dotted}
td.cell{width:38px;height:30px;padding:0}
td.cell div{margin:auto;border-radius:3px;color:#fff;font-size:11px;display:flex;align-items:center;
justify-content:center;cursor:pointer}
tr.section td{background:#f3f3f3;font-weight:bold;text-align:left}
.wrap>div:first-child{flex:0 0 auto}
#detail{flex:1 1 24em;min-width:20em;max-width:48em;border-left:3px solid #ccc;padding-left:1em;overflow-wrap:anywhere}
#detail code{background:#f4f4f4;padding:0 2px}
ul{padding-left:1.2em;margin:.3em 0}
"""
_JS = """
const data = JSON.parse(document.getElementById('board-data').textContent);
const words = JSON.parse(document.getElementById('status-words').textContent);
const panel = document.getElementById('detail');
function list(title, items) {
  if (!items || !items.length) return '';
  const li = items.map(t => '<li><code></code></li>').join('');
  return '<h3>' + title + ' (' + items.length + ')</h3><ul data-items="1">' + li + '</ul>';
}
function fill(html, groups) {
  panel.innerHTML = html;
  panel.querySelectorAll('ul[data-items]').forEach((ul, i) => {
    ul.querySelectorAll('code').forEach((c, j) => { c.textContent = groups[i][j]; });
  });
}
function showGap(i, dtype) {
  const g = data[i];
  const head = document.createElement('h2');
  head.textContent = '#' + g.rank + ' ' + g.name + (dtype ? ' at ' + dtype : '');
  const status = dtype ? g.by_dtype[dtype] : g.status;
  const groups = [];
  let html = '<p>' + words[status] + '</p>';
  const tests = dtype ? g.cell_tests[dtype] : g.tests;
  for (const [title, items] of [['tests held back', tests], ['alone', g.alone], ['shared', g.shared],
                                ['evidence', g.evidence], ['enable', g.enable]]) {
    if (items && items.length) { groups.push(items); html += list(title, items); }
  }
  fill(html, groups);
  panel.prepend(head);
}
document.querySelectorAll('[data-gap]').forEach(el => el.addEventListener('click', () =>
  showGap(Number(el.dataset.gap), el.dataset.dtype || null)));
"""


def _dtypes(board: Board) -> list[str]:
    found = {d for g in board.ranked() for d in g.cells}
    known = [d for d in _DTYPE_ORDER if d in found]
    return known + sorted(found - set(known))


def _gap_data(gap: Gap, rank: int) -> dict[str, Any]:
    return {"rank": rank, "name": str(gap.id), "status": gap.status, "by_dtype": gap.cells,
            "cell_tests": {d: sorted(t) for d, t in gap.cell_tests.items()},
            "tests": sorted(map(str, gap.tests)), "alone": sorted(map(str, gap.alone)),
            "shared": [f"{t} (with {', '.join(sorted(map(str, w)))})" for t, w in sorted(gap.shared.items())],
            "evidence": gap.details[:3], "enable": gap.commands}


def _cell(gap: Gap, index: int, dtype: str, biggest: int) -> str:
    status = gap.cells.get(dtype)
    if status is None:
        return '<td class="cell"></td>'
    tests = sorted(gap.cell_tests.get(dtype, ()))
    side = 12 + round(22 * math.sqrt(len(tests) / max(biggest, 1)))
    tip = html.escape(f"{gap.id} at {dtype}: {STATUS_WORDS[status]}, {len(tests)} test(s)\n" + "\n".join(tests[:20])
                      + (f"\n... {len(tests) - 20} more" if len(tests) > 20 else ""))
    return (f'<td class="cell"><div data-gap="{index}" data-dtype="{html.escape(dtype)}" title="{tip}" '
            f'style="width:{side}px;height:{side}px;background:{COLOURS[status]}">{len(tests)}</div></td>')


def _row(gap: Gap, index: int, dtypes: list[str], biggest: int) -> str:
    cells = "".join(_cell(gap, index, d, biggest) for d in dtypes)
    return (f'<tr><td>{index + 1}</td><td class="name"><a data-gap="{index}">{html.escape(str(gap.id))}</a></td>'
            f'<td class="status">{html.escape(STATUS_WORDS[gap.status])}</td>'
            f"<td>{len(gap.alone)}</td><td>{len(gap.shared)}</td>"
            f"<td>{len(gap.instances)}</td>{cells}</tr>")


def _held_list(title: str, groups: dict[str, list[Any]]) -> str:
    if not groups:
        return ""
    items = "".join(f"<li>{len(hs)} instance(s) of {html.escape(', '.join(sorted({h.test.name for h in hs})))}: "
                    f"{html.escape(why)}</li>" for why, hs in sorted(groups.items(), key=lambda kv: -len(kv[1])))
    return f"<h2>{html.escape(title)}</h2><ul>{items}</ul>"


def _grid(board: Board, dtypes: list[str]) -> str:
    ranked = board.ranked()
    biggest = max((len(t) for g in ranked for t in g.cell_tests.values()), default=1)
    head = "".join(f'<th class="dt">{html.escape(d)}</th>' for d in dtypes)
    rows = [_row(g, i, dtypes, biggest) for i, g in enumerate(board.gaps)]
    if board.dtypes:
        rows.append(f'<tr class="section"><td colspan="{6 + len(dtypes)}">dtypes the device does not declare</td></tr>')
        rows += [_row(g, len(board.gaps) + i, dtypes, biggest) for i, g in enumerate(board.dtypes)]
    return (f"<table><thead><tr><th>#</th><th>gap</th><th>status</th><th>alone</th><th>shared</th><th>instances</th>"
            f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def page(board: Board) -> str:
    """The whole page, self-contained."""
    dtypes = _dtypes(board)
    data = json.dumps([_gap_data(g, i) for i, g in enumerate(board.ranked(), start=1)]).replace("</", "<\\/")
    legend = "".join(f'<span><i style="background:{COLOURS[s]}"></i>{STATUS_WORDS[s]}</span>' for s in STATUS_ORDER)
    body = _grid(board, dtypes) if board.ranked() else "<p>No gap holds a test back.</p>"
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Gap board: {html.escape(board.device)}'
            f"</title><style>{_CSS}</style></head><body><h1>What to implement next on {html.escape(board.device)}</h1>"
            f"<p>{html.escape(headline(board))}.</p><p><small>{html.escape(board.evidence)}. Alone: implementing the gap "
            "alone makes the test runnable; shared: it needs other gaps too. A cell: the tests held back at that dtype "
            f"(hover, or click for the list).</small></p><p class=\"legend\">{legend}</p>"
            f'<div class="wrap"><div>{body}</div><div id="detail"><p>Click a gap or a cell.</p></div></div>'
            f"{_held_list('Unattributed: held back by the device, no gap found', board.unattributed)}"
            f"{_held_list('Held back, not by the device', board.not_device)}"
            f'<script type="application/json" id="board-data">{data}</script>'
            f'<script type="application/json" id="status-words">{json.dumps(STATUS_WORDS)}</script>'
            f"<script>{_JS}</script></body></html>\n")
