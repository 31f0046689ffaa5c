"""Test names in rich tables: wrapped at their segment boundaries, never cut mid-word.

rich wraps a cell at spaces and folds a longer word letter by letter, so a node id such as
``test/test_ops.py::TestCommonCPU::test_noncontiguous_samples_cpu`` came out as
``...test_noncontiguous_sampl`` / ``es_cpu``. :class:`Wrapped` breaks lines after a space,
``::`` or ``/`` (or before ``[``), and within a piece too long for a line after ``_`` or a
hyphen; it tells the table the longest unbreakable piece as its minimum width, so the table
narrows other columns first. Only a piece wider than the whole column is folded (no text is
ever dropped).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text

# Where a line may break: after whitespace or ``::`` or ``/`` or ``,`` (before the next
# non-separator), or before ``[``; and, only inside a piece too long for a line, after ``_``
# or a hyphen inside a word (``float32-cpu``; not a sign, ``-int8`` or ``--top``, nor ``->``).
_MAJOR = re.compile(r"(?<=\s)(?=\S)(?!->)|(?:(?<=::)|(?<=[/,]))(?=[^\s:/,])|(?<=\S)(?=\[)")
_MINOR = re.compile(r"(?:(?<=_)|(?<=[^\s-]-))(?=[^\s_>-])")


def break_points(plain: str, minor: bool = True) -> list[int]:
    """Offsets in ``plain`` where a line may break (excluding 0 and ``len(plain)``)."""
    found = {m.start() for m in _MAJOR.finditer(plain)}
    if minor:
        found |= {m.start() for m in _MINOR.finditer(plain)}
    return sorted(i for i in found if 0 < i < len(plain))


def pieces(plain: str, minor: bool = True) -> list[str]:
    """``plain`` cut at every break point (``"".join(pieces(s)) == s``)."""
    bounds = [0, *break_points(plain, minor), len(plain)]
    return [plain[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def wrap_lines(plain: str, width: int) -> list[tuple[int, int]]:
    """(start, end) spans of ``plain``'s lines at ``width``, greedy: at a space, ``::`` or
    ``/`` where one fits, else at ``_`` or a hyphen; trailing spaces not counted; only a piece
    wider than ``width`` with no break point in it is folded."""
    width = max(1, width)
    spans: list[tuple[int, int]] = []
    for offset, line in _hard_lines(plain):
        start = end = 0

        def place(a: int, b: int) -> None:
            nonlocal start, end
            if start == end or len(line[start:b].rstrip()) <= width:
                end = b
            else:
                spans.append((offset + start, offset + end))
                start, end = a, b

        for major in _spans(line, minor=False):
            a, b = major
            if len(line[start:b].rstrip()) <= width or len(line[a:b].rstrip()) <= width:
                place(a, b)
                continue
            for ma, mb in _spans(line[a:b], minor=True):  # too long for any line: break at `_` too
                place(a + ma, a + mb)
        spans.append((offset + start, offset + end))
    folded: list[tuple[int, int]] = []
    for a, b in spans:
        b = a + len(plain[a:b].rstrip())
        while b - a > width:  # one piece wider than the column: fold it, drop nothing
            folded.append((a, a + width))
            a += width
        folded.append((a, b))
    return folded


def _spans(text: str, minor: bool) -> list[tuple[int, int]]:
    bounds = [0, *break_points(text, minor), len(text)]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def _hard_lines(plain: str) -> Iterator[tuple[int, str]]:
    offset = 0
    for line in plain.split("\n"):
        yield offset, line
        offset += len(line) + 1


class Wrapped:
    """A cell (or line) that wraps at name segment boundaries; ``Wrapped("a::b")`` or
    ``Wrapped(Text(...))`` to keep styles."""

    def __init__(self, text: str | Text, style: str = "") -> None:
        self.text = text.copy() if isinstance(text, Text) else Text(text, style=style)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        plain = self.text.plain
        longest_piece = max((len(p.rstrip()) for line in plain.split("\n") for p in pieces(line)), default=0)
        longest_line = max((len(line.rstrip()) for line in plain.split("\n")), default=0)
        return Measurement(min(longest_piece, options.max_width), min(longest_line, options.max_width))

    def lines(self, width: int) -> list[Text]:
        return [self.text[a:b] for a, b in wrap_lines(self.text.plain, width)]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = self.lines(options.max_width)
        joined = Text("\n").join(lines)
        joined.no_wrap = True
        joined.overflow = "fold"
        joined.justify = self.text.justify
        yield joined


def wrap_text(text: str, width: int) -> str:
    """``text`` laid out at ``width`` as :class:`Wrapped` does (for plain-text outputs and tests)."""
    return "\n".join(line.plain for line in Wrapped(text).lines(width))
