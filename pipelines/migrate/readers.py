"""Readers of other teams' skip lists, as data: an intel/torch-xpu-ops style ``skip_dict``
(read with ``ast``, never executed) and PyTorch's disabled-tests JSON. The formats and how
their patterns are matched are described in :mod:`testcurator.pipelines.migrate.importers`.

Their reasons are comments, kept the way a reader of the list understands them: a comment
block applies to every pattern under it until the next blank line or comment block, and a
trailing comment to the patterns on its line. A key or pattern that is not data (a call, an
f-string with more than module-level string names) is reported with its line and skipped;
the rest of the list is still read.
"""

from __future__ import annotations

import ast
import io
import json
import tokenize
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from testcurator.errors import BadInputError, ConfigError, Location, Problem
from testcurator.pipelines.migrate.exporters import parse_key


@dataclass(frozen=True)
class Pattern:
    """One skip-list pattern (or disabled-tests key) and where it came from."""

    text: str
    line: int
    comment: str | None = None  # their reason: the comment block above it and/or on its line


@dataclass(frozen=True)
class SourceFile:
    """One file of a skip list: its upstream path (relative to the torch root) and patterns."""

    key: str
    upstream: str
    patterns: tuple[Pattern, ...]
    line: int = 0


@dataclass(frozen=True)
class SkipList:
    """What a skip list says, and what of it could not be read as data (reported, skipped)."""

    files: list[SourceFile]
    unreadable: list[Problem]


# --- reading the xpu-ops skip list (as data) ------------------------------------------
class _NotData(Exception):
    def __init__(self, node: ast.AST, message: str) -> None:
        super().__init__(message)
        self.node = node


def read_skip_list(path: Path, *, strip_suffix: str = "_xpu", test_dir: str = "test") -> SkipList:
    """The ``skip_dict`` of ``path``, without executing it."""
    text = path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise ConfigError([Problem(Location(str(path), exc.lineno, exc.offset), f"Python syntax error: {exc.msg}")]) from exc
    consts: dict[str, str] = {}
    found: ast.Dict | None = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name == "skip_dict":
                found = node.value if isinstance(node.value, ast.Dict) else _fail(path, node, "skip_dict is not a dict literal")
            elif isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                consts[name] = node.value.value
    if found is None:
        raise BadInputError(f"{path}: no top-level 'skip_dict = {{...}}' assignment")
    comments = _Comments(text)
    out, unreadable = [], []
    for key_node, value_node in zip(found.keys, found.values):
        try:
            if key_node is None:
                raise _NotData(value_node, "'**' expansion in skip_dict is not data")
            key = _string(key_node, consts)
        except _NotData as exc:
            unreadable.append(_problem(path, exc.node, f"key skipped: {exc} "
                                       f"({_count(value_node)} pattern(s) under it not imported)"))
            continue
        patterns = _patterns(path, value_node, consts, comments, unreadable)
        out.append(SourceFile(key, upstream_path(key, strip_suffix, test_dir), patterns, key_node.lineno))
    return SkipList(sorted(out, key=lambda f: (f.upstream, f.key)), unreadable)


def _problem(path: Path, node: ast.AST, message: str) -> Problem:
    line = getattr(node, "lineno", None)
    return Problem(Location(str(path), line, (getattr(node, "col_offset", 0) or 0) + 1 if line else None), message)


def _fail(path: Path, node: ast.AST, message: str) -> Any:
    raise ConfigError([_problem(path, node, message)])


def _count(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and node.value is None:
        return 0
    return len(node.elts) if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else 1


def _string(node: ast.AST, consts: dict[str, str]) -> str:
    # Only what a data file needs: "a", NAME (a module-level string), "a" + NAME, and
    # f"{NAME}/a" (today's xpu-ops keys): names resolve to module-level strings, nothing runs.
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in consts:
            return consts[node.id]
        raise _NotData(node, f"{node.id} is not a module-level string of this file")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _string(node.left, consts) + _string(node.right, consts)
    if isinstance(node, ast.JoinedStr):
        return "".join(_fstring_part(part, consts) for part in node.values)
    raise _NotData(node, f"expected a string, found {ast.unparse(node)[:60]!r}")


def _fstring_part(part: ast.AST, consts: dict[str, str]) -> str:
    if isinstance(part, ast.FormattedValue):
        if part.conversion != -1 or part.format_spec is not None:
            raise _NotData(part, "an f-string field with a conversion or format spec is not data")
        return _string(part.value, consts)
    return _string(part, consts)


def _patterns(path: Path, node: ast.AST, consts: dict[str, str], comments: _Comments,
              unreadable: list[Problem]) -> tuple[Pattern, ...]:
    if isinstance(node, ast.Constant) and node.value is None:
        return ()
    elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]  # ("x") is a str, not a tuple
    out = []
    for e in elts:
        try:
            # The walk up for a comment block stops at the line that opens this file's patterns.
            reason = comments.reason(e.lineno, e.end_lineno or e.lineno, floor=node.lineno if e is not node else e.lineno)
            out.append(Pattern(_string(e, consts), e.lineno, reason))
        except _NotData as exc:
            unreadable.append(_problem(path, exc.node, f"pattern skipped: {exc}"))
    return tuple(out)


class _Comments:
    """Where the comments of a source are (``tokenize``: a ``#`` inside a string is no comment)."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.block: dict[int, str] = {}  # 1-based line -> a comment alone on its line
        self.trailing: dict[int, str] = {}  # 1-based line -> a comment after code
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                row, col = tok.start
                body = tok.string.lstrip("#").strip()
                if self.lines[row - 1][:col].strip():
                    self.trailing[row] = body
                else:
                    self.block[row] = body

    def reason(self, first: int, last: int, floor: int) -> str | None:
        """The block above ``first`` (across other patterns, up to a blank line, not above
        ``floor``) and the trailing comments of lines ``first..last``."""
        above: list[str] = []
        row = first - 1
        while row > floor and row not in self.block and self.lines[row - 1].strip():
            row -= 1  # a pattern line above: the same block still applies
        while row > floor and row in self.block:
            above.append(self.block[row])
            row -= 1
        parts = [" ".join(reversed(above))] if above else []
        parts += [self.trailing[r] for r in range(first, last + 1) if r in self.trailing]
        return " ".join(p for p in parts if p) or None


def upstream_path(key: str, strip_suffix: str = "_xpu", test_dir: str = "test") -> str:
    """``../../test/nn/test_x.py`` or ``nn/test_x_xpu.py`` -> ``test/nn/test_x.py``."""
    parts = [p for p in PurePosixPath(key.replace("\\", "/")).parts if p not in ("..", ".")]
    if parts and parts[0] == test_dir:
        parts = parts[1:]
    rel = PurePosixPath(*parts) if parts else PurePosixPath(key)
    if strip_suffix and rel.stem.endswith(strip_suffix):
        rel = rel.with_name(rel.stem[: -len(strip_suffix)] + rel.suffix)
    return str(PurePosixPath(test_dir) / rel)


# --- reading PyTorch's disabled-tests JSON ---------------------------------------------
def read_disabled_tests(path: Path, *, platform: str | None = None) -> list[Pattern]:
    """Keys of the JSON (those for ``platform``, or all), with their issue as comment."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError([Problem(Location(str(path), exc.lineno, exc.colno), f"invalid JSON: {exc.msg}")]) from exc
    if not isinstance(data, dict):
        raise BadInputError(f"{path}: expected a JSON object of 'test (module.Class)': [issue, [platforms]]")
    out = []
    for key, value in sorted(data.items()):
        parse_key(key)
        if not (isinstance(value, list) and len(value) == 2 and isinstance(value[1], list)):
            raise BadInputError(f"{path}: value of {key!r} is not [issue, [platforms]]")
        if platform is not None and value[1] and platform not in value[1]:
            continue
        where = f" on {', '.join(map(str, value[1]))}" if value[1] else ""
        out.append(Pattern(key, 0, f"{value[0]}{where}" if value[0] else None))
    return out
