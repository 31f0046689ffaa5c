"""YAML reading with positions, and atomic writing.

Everything that reads a config goes through :func:`read_yaml` so that every later problem
can be reported as ``file:line:col`` (1-based), and everything that writes goes through
:func:`testcurator.files.atomic_write_text` so that a crash never leaves a half-written file behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError

from testcurator.errors import ConfigError, Location, Problem


def _round_trip() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    return yaml


def read_yaml(path: Path) -> Any:
    """Parse ``path`` keeping positions; YAML syntax errors become a ConfigError."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Problem(Location(str(path)), f"cannot read file: {exc}")]) from exc
    try:
        return _round_trip().load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        col = mark.column + 1 if mark is not None else None
        what = exc.problem or exc.context or "invalid YAML"
        raise ConfigError([Problem(Location(str(path), line, col), f"YAML syntax error: {what}")]) from exc


def locate(root: Any, loc: Sequence[str | int], file: str, *, at_key: bool = False) -> Location:
    """The position of the node at ``loc`` (a pydantic error location) inside ``root``.

    Walks as deep as the document goes, so an error about a missing field points at the
    mapping that lacks it. ``at_key`` points at the last key itself (unknown-key errors).
    """
    node: Any = root
    line, col = _start(root)
    for index, part in enumerate(loc):
        last = index == len(loc) - 1
        if isinstance(node, CommentedMap) and part in node:
            if at_key and last:
                line, col = node.lc.key(part)
            elif isinstance(node[part], (CommentedMap, CommentedSeq)) and len(node[part]):
                line, col = _start(node[part])
            else:
                line, col = node.lc.value(part)
            node = node[part]
        elif isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
            line, col = node.lc.item(part)
            node = node[part]
        else:
            break
    return Location(file, None if line is None else line + 1, None if col is None else col + 1)


def _start(node: Any) -> tuple[int | None, int | None]:
    if isinstance(node, (CommentedMap, CommentedSeq)):
        return node.lc.line, node.lc.col
    return None, None


def to_plain(node: Any) -> Any:
    """ruamel's round-trip containers as plain dicts, lists and scalars."""
    if isinstance(node, dict):
        return {str(k): to_plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [to_plain(v) for v in node]
    if isinstance(node, str):
        return str(node)
    return node
