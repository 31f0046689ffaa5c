"""The gap board as text (a terminal), markdown (a file, a PR) and JSON (machines).

JSON is :func:`testcurator.pipelines.gaps.board.board_json`: a list of objects with ``op``,
``status``, ``dtypes``, ``tests`` (generic names), ``instances``, ``alone`` (generic names) and
``shared_with`` (gaps), the ranked gaps first.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from testcurator.pipelines.gaps.board import STATUS_WORDS, Board, Gap, board_json, headline
from testcurator.pipelines.gaps.attribute import Held
from testcurator.pipelines.gaps.html import page
from testcurator.vocab import TestKey

SHOWN = 8  # test names listed per gap before "and N more"
COLUMNS = ("#", "gap", "status", "dtypes", "alone", "shared", "instances")


def _listed(names: Sequence[str], shown: int = SHOWN) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _tests(tests: Iterable[TestKey]) -> list[str]:
    return sorted({t.name for t in tests})


def _dtypes(gap: Gap) -> str:
    return " ".join(sorted(gap.cells))


def _rows(board: Board) -> list[tuple[str, ...]]:
    return [(str(i), str(g.id), STATUS_WORDS[g.status], _dtypes(g), str(len(g.alone)), str(len(g.shared)),
             str(len(g.instances))) for i, g in enumerate(board.ranked(), start=1)]


def _shared_lines(gap: Gap) -> list[str]:
    return [f"{t.name} (with {', '.join(sorted(map(str, w)))})" for t, w in sorted(gap.shared.items())]


def _held_groups(groups: dict[str, list[Held]]) -> list[tuple[str, int, list[str]]]:
    return [(why, len(hs), _tests(h.test for h in hs)) for why, hs in sorted(groups.items(), key=lambda kv: -len(kv[1]))]


def text(board: Board) -> str:
    """The board for a terminal: one row per gap, its tests under it."""
    rows = [COLUMNS, *_rows(board)]
    widths = [min(max(len(r[i]) for r in rows), 48) for i in range(len(COLUMNS))]
    lines = [headline(board), f"(evidence: {board.evidence})", ""]
    for n, row in enumerate(rows):
        lines.append("  ".join(cell[:48].ljust(w) for cell, w in zip(row, widths)).rstrip())
        gap = board.ranked()[n - 1] if n else None
        if gap is None:
            continue
        if gap.alone:
            lines.append(f"     alone: {_listed(_tests(gap.alone))}")
        if gap.shared:
            lines.append(f"     shared: {_listed(_shared_lines(gap), 4)}")
        lines += [f"     enable: {c}" for c in gap.commands[:2]]
        if gap.unrouted:
            lines.append(f"     no enable-op command admits {_listed(_tests(gap.unrouted), 4)}: run again once it works")
    for title, groups in (("Unattributed: held back by the device, no gap found", board.unattributed),
                          ("Held back, not by the device", board.not_device)):
        if groups:
            lines += ["", title]
            lines += [f"  {n} instance(s) of {_listed(tests, 4)}: {why}" for why, n, tests in _held_groups(groups)]
    return "\n".join(lines) + "\n"


def _md_cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")


def markdown(board: Board, *, top: int | None = None, heading: str = "#") -> list[str]:
    """The board as markdown lines (``top``: only the first gaps, for the report)."""
    gaps = board.ranked()[:top] if top else board.ranked()
    lines = [f"{heading} What to implement next", "", headline(board) + ".", "",
             f"Evidence: {board.evidence}. Alone: implementing the gap alone makes the test runnable; shared: the "
             "test needs the other gaps named too.", "",
             "| # | gap | status | dtypes | alone | shared | instances | alone tests |", "|---:|---|---|---|---:|---:|---:|---|"]
    for i, gap in enumerate(gaps, start=1):
        lines.append(f"| {i} | `{gap.id}` | {STATUS_WORDS[gap.status]} | {_dtypes(gap)} | {len(gap.alone)} | "
                     f"{len(gap.shared)} | {len(gap.instances)} | {_md_cell(_listed(_tests(gap.alone), 4))} |")
    if top:
        return lines
    for i, gap in enumerate(gaps, start=1):
        lines += ["", f"{heading}# {i}. `{gap.id}`: {STATUS_WORDS[gap.status]}", "",
                  "By dtype: " + ", ".join(f"{d} {STATUS_WORDS[s]}" for d, s in sorted(gap.cells.items())), ""]
        lines += [f"- alone: `{t}`" for t in _tests(gap.alone)]
        lines += [f"- shared: `{line}`" for line in _shared_lines(gap)]
        lines += [f"- evidence: `{_md_cell(d[:200])}`" for d in gap.details[:3]]
        lines += [f"- enable: `{c}`" for c in gap.commands]
        lines += [f"- no enable-op command admits `{t}`: run again once the gap is implemented" for t in
                  _tests(gap.unrouted)]
    for title, groups in (("Unattributed: held back by the device, no gap found", board.unattributed),
                          ("Held back, not by the device", board.not_device)):
        if groups:
            lines += ["", f"{heading}# {title}", ""]
            lines += [f"- {n} instance(s): {_md_cell(why[:300])}: {', '.join(f'`{t}`' for t in tests)}"
                      for why, n, tests in _held_groups(groups)]
    return lines


def as_json(board: Board) -> str:
    return json.dumps(board_json(board), indent=1) + "\n"


def render(board: Board, fmt: str) -> str:
    """The board in ``fmt`` (text, markdown, json, html)."""
    if fmt == "html":
        return page(board)
    if fmt == "markdown":
        return "\n".join(markdown(board)) + "\n"
    return as_json(board) if fmt == "json" else text(board)
