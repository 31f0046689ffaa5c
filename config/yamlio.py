"""YAML reading with positions (writes go through ``testcurator.files``).

Everything that reads a config goes through :func:`read_yaml` so that every later problem
can be reported as ``file:line:col`` (1-based), and everything that writes goes through
:func:`testcurator.files.atomic_write_text` so that a crash never leaves a half-written file behind.

Reading is the fast path: PyYAML's C parser (libyaml, ``CSafeLoader``) composes a node
tree that keeps every node's position, and :func:`to_data` turns it into plain dicts,
lists and scalars for validation. PyTorch-size configs hold tens of thousands of entries
and the pytest plugin loads the same files at every run, so this path costs about what the
C loader alone costs (``bench/config_load.py``). ruamel.yaml, which keeps comments but is
~8x slower, is used only where comments must survive a write (``config/editor.py``).

Unlike PyYAML's own constructor, :func:`to_data` reports a key given twice in one mapping
(PyYAML would keep the last silently) and a key that is not a scalar.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from testcurator.errors import ConfigError, Location, Problem

_STR = "tag:yaml.org,2002:str"
_NODE_CLASSES: dict[str, Any] = {"scalar": ScalarNode, "sequence": SequenceNode, "mapping": MappingNode}
_MERGE = "tag:yaml.org,2002:merge"
_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # pure Python where libyaml is missing


class _Loader(_Base):  # type: ignore[misc, valid-type]
    """The safe loader, with tag resolution that is faster and does not depend on class identity.

    libyaml asks the (Python) resolver for the tag of every node. A quoted scalar, or a plain
    one whose first character starts no implicit type (int, bool, null, float...), is a string
    whatever its rest, which is what PyYAML's resolver would conclude too, after more work.
    Node kinds are told by their ``id``: PyYAML's own resolver compares classes by identity,
    which fails (and resolves no tag at all) when ``yaml.nodes`` was imported afresh beside
    the C extension's copy, as pytest's in-process runs (pytester) do.
    """

    _STARTS = frozenset(k for k in _Base.yaml_implicit_resolvers if k)

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        node_id = getattr(kind, "id", None)
        if node_id == "sequence":
            return self.DEFAULT_SEQUENCE_TAG
        if node_id == "mapping":
            return self.DEFAULT_MAPPING_TAG
        if not implicit[0] or (value and value[0] not in self._STARTS and None not in self.yaml_implicit_resolvers):
            return self.DEFAULT_SCALAR_TAG
        resolvers = self.yaml_implicit_resolvers
        for tag, regexp in resolvers.get(value[0] if value else "", []) + resolvers.get(None, []):
            if regexp.match(value):
                return tag
        return self.DEFAULT_SCALAR_TAG


def read_yaml(path: Path) -> Node | None:
    """Parse ``path`` into a node tree with positions (None: no document in the file).

    Syntax errors, a second document, and unreadable files become a ConfigError.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Problem(Location(str(path)), f"cannot read file: {exc}")]) from exc
    return compose(text, str(path))


def compose(text: str, file: str) -> Node | None:
    """The node tree of one YAML document in ``text`` (``file`` names it in errors)."""
    loader = _Loader(text)
    try:
        return loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = Location(file, mark.line + 1, mark.column + 1) if mark is not None else Location(file)
        what = ", ".join(x for x in (exc.context, exc.problem) if x) or "invalid YAML"
        raise ConfigError([Problem(where, f"YAML syntax error: {what}")]) from exc
    except yaml.YAMLError as exc:  # e.g. a character YAML does not allow (no mark)
        raise ConfigError([Problem(Location(file), f"YAML error: {exc}")]) from exc
    finally:
        loader.dispose()


def to_data(root: Node | None, file: str) -> Any:
    """The plain data of a node tree; duplicate and non-scalar keys are a ConfigError."""
    if root is None:
        return None
    problems: list[Problem] = []
    constructor = yaml.constructor.SafeConstructor()
    data = _Converter(constructor, problems, file).value(root)
    if problems:
        raise ConfigError(problems)
    return data


class _Converter:
    """Node tree -> plain data. Strings (nearly every scalar of a config) skip the
    constructor; ints, bools, nulls and the rest go through PyYAML's safe constructor."""

    def __init__(self, constructor: Any, problems: list[Problem], file: str) -> None:
        self.constructor, self.problems, self.file = constructor, problems, file

    def value(self, node: Node) -> Any:
        kind = node.id  # not the class: see _Loader
        if kind == "scalar":
            return node.value if node.tag == _STR else self.construct(node)
        if kind == "sequence":
            return [item.value if item.tag == _STR and item.id == "scalar" else self.value(item) for item in node.value]
        if kind == "mapping":
            return self.mapping(node)
        return self.construct(node)

    def construct(self, node: Node) -> Any:
        """PyYAML's constructor for what is not a plain string (ints, bools, ``<<`` merges)."""
        return self.constructor.construct_object(_native(node), deep=True)

    def mapping(self, node: Node) -> dict[Any, Any]:
        if any(key.tag == _MERGE for key, _ in node.value):
            return self.construct(node)  # rare: let PyYAML merge ``<<``
        out: dict[Any, Any] = {}
        first: dict[Any, Node] = {}
        for key_node, value_node in node.value:
            if key_node.id != "scalar":
                self.problems.append(Problem(position(key_node, self.file), "a mapping key must be a plain value"))
                continue
            key = key_node.value if key_node.tag == _STR else self.construct(key_node)
            if key in first:
                line = first[key].start_mark.line + 1
                self.problems.append(Problem(position(key_node, self.file), f"key {key!r} given twice (first at line {line})"))
                continue
            first[key] = key_node
            out[key] = self.value(value_node)
        return out


def _native(node: Node) -> Node:
    """``node`` rebuilt from this ``yaml.nodes`` when the C extension made it from another copy
    of the module (see _Loader): PyYAML's constructor checks node classes by isinstance."""
    cls = _NODE_CLASSES[node.id]
    if node.__class__ is cls:
        return node
    if node.id == "scalar":
        return cls(node.tag, node.value, node.start_mark, node.end_mark, node.style)
    if node.id == "sequence":
        value: Any = [_native(item) for item in node.value]
    else:
        value = [(_native(k), _native(v)) for k, v in node.value]
    return cls(node.tag, value, node.start_mark, node.end_mark, node.flow_style)


def position(node: Node, file: str) -> Location:
    """Where ``node`` starts, 1-based."""
    mark = node.start_mark
    return Location(file, mark.line + 1, mark.column + 1)


def child(node: Node | None, part: str | int) -> tuple[Node, Node] | None:
    """(key node or item node, value node) of ``part`` inside ``node``; None when absent."""
    kind = getattr(node, "id", None)
    if kind == "mapping":
        for key, value in node.value:  # type: ignore[union-attr]
            if key.id == "scalar" and key.value == part:
                return key, value
    elif kind == "sequence" and isinstance(part, int) and 0 <= part < len(node.value):  # type: ignore[union-attr]
        item = node.value[part]
        return item, item
    return None


def node_at(root: Node | None, loc: Sequence[str | int]) -> Node | None:
    """The node at ``loc`` (keys and indexes), or None when the document stops short."""
    node = root
    for part in loc:
        found = child(node, part)
        if found is None:
            return None
        node = found[1]
    return node


def locate(root: Node | None, loc: Sequence[str | int], file: str, *, at_key: bool = False) -> Location:
    """The position of the node at ``loc`` (a pydantic error location) inside ``root``.

    Walks as deep as the document goes, so an error about a missing field points at the
    mapping that lacks it. ``at_key`` points at the last key itself (unknown-key errors).
    """
    if root is None:
        return Location(file, 1, 1)
    node, where = root, root
    for index, part in enumerate(loc):
        found = child(node, part)
        if found is None:
            break
        key, node = found
        where = key if at_key and index == len(loc) - 1 else node
    return position(where, file)


def to_plain(node: Any) -> Any:
    """Containers (ruamel's round-trip ones included) as plain dicts, lists and scalars."""
    if isinstance(node, dict):
        return {str(k): to_plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [to_plain(v) for v in node]
    if isinstance(node, str):
        return str(node)
    return node
