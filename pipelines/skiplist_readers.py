"""Readers of other teams' skip lists, as data: an intel/torch-xpu-ops style ``skip_dict``
(read with ``ast``, never executed) and PyTorch's disabled-tests JSON. The formats and how
their patterns are matched are described in :mod:`testcurator.pipelines.importers`.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from testcurator.errors import BadInputError, ConfigError, Location, Problem
from testcurator.pipelines.exporters import parse_key


@dataclass(frozen=True)
class Pattern:
    """One skip-list pattern (or disabled-tests key) and where it came from."""

    text: str
    line: int
    comment: str | None = None  # the comment above it in the source (their reason)


@dataclass(frozen=True)
class SourceFile:
    """One file of a skip list: its upstream path (relative to the torch root) and patterns."""

    key: str
    upstream: str
    patterns: tuple[Pattern, ...]


# --- reading the xpu-ops skip list (as data) ------------------------------------------
def read_skip_list(path: Path, *, strip_suffix: str = "_xpu", test_dir: str = "test") -> list[SourceFile]:
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
    lines = text.splitlines()
    out = []
    for key_node, value_node in zip(found.keys, found.values):
        if key_node is None:
            _fail(path, value_node, "'**' expansion in skip_dict is not supported")
        key = _string(path, key_node, consts)
        out.append(SourceFile(key, upstream_path(key, strip_suffix, test_dir), _patterns(path, value_node, consts, lines)))
    return sorted(out, key=lambda f: (f.upstream, f.key))


def _fail(path: Path, node: ast.AST, message: str) -> Any:
    line = getattr(node, "lineno", None)
    raise ConfigError([Problem(Location(str(path), line, (getattr(node, "col_offset", 0) or 0) + 1 if line else None), message)])


def _string(path: Path, node: ast.AST, consts: dict[str, str]) -> str:
    # Only what a data file needs: "a", NAME (a module-level string), and "a" + NAME.
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id in consts:
        return consts[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _string(path, node.left, consts) + _string(path, node.right, consts)
    return _fail(path, node, f"expected a string literal, found {ast.dump(node)[:60]}")


def _patterns(path: Path, node: ast.AST, consts: dict[str, str], lines: list[str]) -> tuple[Pattern, ...]:
    if isinstance(node, ast.Constant) and node.value is None:
        return ()
    elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]  # ("x") is a str, not a tuple
    return tuple(Pattern(_string(path, e, consts), e.lineno, _comment_above(lines, e.lineno)) for e in elts)


def _comment_above(lines: list[str], lineno: int) -> str | None:
    out: list[str] = []
    i = lineno - 2
    while i >= 0 and lines[i].strip().startswith("#"):
        out.append(lines[i].strip().lstrip("#").strip())
        i -= 1
    return " ".join(reversed(out)) or None


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
