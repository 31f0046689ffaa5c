"""Which ops a backend registers, read from its source with tree-sitter.

C++: ``TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("add.Tensor", ...); }`` (names may
be wrapped in ``TORCH_SELECTIVE_NAME("aten::add.Tensor")``) and boxed fallbacks
``TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(...); }``.
Python: ``torch.library.impl("aten::add", "PrivateUse1")`` (call or decorator),
``torch.library.register_kernel("aten::add", "<device>")``, and
``lib = torch.library.Library("aten", "IMPL"); lib.impl("add.Tensor", fn, "PrivateUse1")``
plus ``lib.fallback(fn, dispatch_key="PrivateUse1")``.

Only registrations for the PrivateUse1 family of dispatch keys (PrivateUse1,
AutogradPrivateUse1, AutocastPrivateUse1...) or the backend's device name are kept. A
registration says an op has a device kernel; it does not say the op is missing otherwise
(composite ops decompose, a boxed fallback covers everything), so callers treat the result
as evidence, not as the complete list of what works.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

import tree_sitter_cpp
import tree_sitter_python
from tree_sitter import Language, Node, Parser

from testcurator.errors import Location, MissingPathError

CPP_SUFFIXES = frozenset({".cpp", ".cc", ".cxx", ".c++", ".h", ".hh", ".hpp", ".hxx", ".cu", ".mm"})
PY_SUFFIXES = frozenset({".py"})
_SELECTIVE = {"TORCH_SELECTIVE_NAME", "TORCH_SELECTIVE_SCHEMA"}
_OPS_ATTR_RE = re.compile(r"^(?:torch\.)?ops\.(\w+)\.(\w+)(?:\.(\w+))?$")


@dataclass(frozen=True)
class Registration:
    """One kernel (``kind="impl"``) or boxed fallback registered for the backend."""

    op: str  # "aten::add.Tensor"; "*" for a fallback
    namespace: str
    dispatch_key: str
    kind: Literal["impl", "fallback"]
    location: Location

    @property
    def evidence(self) -> str:
        what = f"registers {self.op}" if self.kind == "impl" else f"boxed fallback for namespace {self.namespace}"
        return f"{self.location}: {what} ({self.dispatch_key})"


@dataclass(frozen=True)
class Discovery:
    registrations: tuple[Registration, ...]

    def ops(self, namespace: str = "aten") -> frozenset[str]:
        """Qualified op names with a kernel in ``namespace`` (``aten::add.Tensor``)."""
        return frozenset(r.op for r in self.registrations if r.kind == "impl" and r.namespace == namespace)

    @property
    def has_fallback(self) -> bool:
        return any(r.kind == "fallback" for r in self.registrations)

    def evidence(self, op: str) -> list[str]:
        return [r.evidence for r in self.registrations if r.op == op]


def wanted_key(key: str, device: str | None) -> bool:
    low = key.lower()
    return "privateuse1" in low or "privateuseone" in low or (device is not None and low == device.lower())


def qualify(name: str, namespace: str) -> str:
    name = name.split("(", 1)[0].strip()  # a schema string: keep the name
    return name if "::" in name else f"{namespace}::{name}"


@lru_cache(maxsize=2)
def _parser(lang: str) -> Parser:
    grammar = tree_sitter_cpp if lang == "cpp" else tree_sitter_python
    return Parser(Language(grammar.language()))


def source_files(paths: Iterable[Path]) -> Iterator[Path]:
    for path in paths:
        if not path.exists():
            raise MissingPathError(path, "backend source path")
        candidates = sorted(path.rglob("*")) if path.is_dir() else [path]
        yield from (p for p in candidates if p.is_file() and p.suffix in CPP_SUFFIXES | PY_SUFFIXES)


def discover_ops(paths: Iterable[Path], device: str | None = None) -> Discovery:
    """Every PrivateUse1-family registration in the C++ and Python files under ``paths``."""
    found: list[Registration] = []
    for file in source_files(paths):
        source = file.read_bytes()
        scan = _scan_cpp if file.suffix in CPP_SUFFIXES else _scan_python
        found.extend(r for r in scan(source, str(file)) if wanted_key(r.dispatch_key, device))
    return Discovery(tuple(found))


def _walk(node: Node, kind: str) -> Iterator[Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == kind:
            yield current
        stack.extend(reversed(current.children))


def _text(node: Node | None) -> str:
    return "" if node is None or node.text is None else node.text.decode("utf-8", "replace")


def _loc(file: str, node: Node) -> Location:
    return Location(file, node.start_point[0] + 1, node.start_point[1] + 1)


# --- C++ -------------------------------------------------------------------------------

def _scan_cpp(source: bytes, file: str) -> Iterator[Registration]:
    root = _parser("cpp").parse(source).root_node
    # tree-sitter reads `TORCH_LIBRARY_IMPL(ns, key, m) { ... }` as a function definition
    # named TORCH_LIBRARY_IMPL with three parameters.
    for fn in _walk(root, "function_definition"):
        decl = fn.child_by_field_name("declarator")
        if decl is None or decl.type != "function_declarator" or _text(decl.child_by_field_name("declarator")) != "TORCH_LIBRARY_IMPL":
            continue
        params = [_text(p) for p in (decl.child_by_field_name("parameters") or decl).named_children]
        if len(params) != 3:
            continue
        namespace, key, var = params
        yield from _cpp_body(fn.child_by_field_name("body"), namespace, key, var, file)


def _cpp_body(body: Node | None, namespace: str, key: str, var: str, file: str) -> Iterator[Registration]:
    if body is None:
        return
    for call in _walk(body, "call_expression"):
        fn = call.child_by_field_name("function")
        if fn is None or fn.type != "field_expression" or _text(fn.child_by_field_name("argument")) != var:
            continue
        method = _text(fn.child_by_field_name("field"))
        args = (call.child_by_field_name("arguments") or call).named_children
        if method == "fallback":
            yield Registration("*", namespace, key, "fallback", _loc(file, call))
        elif method == "impl" and args:
            name = _cpp_string(args[0])
            if name:
                yield Registration(qualify(name, namespace), namespace, key, "impl", _loc(file, call))


def _cpp_string(node: Node) -> str | None:
    if node.type == "string_literal":
        return "".join(_text(c) for c in node.named_children if c.type == "string_content")
    if node.type == "call_expression" and _text(node.child_by_field_name("function")) in _SELECTIVE:
        inner = (node.child_by_field_name("arguments") or node).named_children
        return _cpp_string(inner[0]) if inner else None
    return None


# --- Python ----------------------------------------------------------------------------

def _scan_python(source: bytes, file: str) -> Iterator[Registration]:
    root = _parser("python").parse(source).root_node
    libraries = _libraries(root)
    for call in _walk(root, "call"):
        fn = _text(call.child_by_field_name("function"))
        args, kwargs = _py_args(call)
        if fn in ("torch.library.impl", "library.impl", "impl") and args:
            name = _py_op(args[0])
            keys = _py_strings(kwargs.get("types") or kwargs.get("device_types") or (args[1] if len(args) > 1 else None))
            if name:
                yield from (Registration(qualify(name, "aten"), _ns(name), k, "impl", _loc(file, call)) for k in keys)
        elif fn in ("torch.library.register_kernel", "library.register_kernel", "register_kernel") and args:
            name = _py_op(args[0])
            keys = _py_strings(kwargs.get("device_types") or (args[1] if len(args) > 1 else None))
            if name:
                yield from (Registration(qualify(name, "aten"), _ns(name), k, "impl", _loc(file, call)) for k in keys)
        elif "." in fn and fn.rsplit(".", 1)[0] in libraries:
            yield from _library_call(fn, args, kwargs, libraries[fn.rsplit(".", 1)[0]], call, file)


def _library_call(fn: str, args: list[Node], kwargs: dict[str, Node], library: tuple[str, str],
                  call: Node, file: str) -> Iterator[Registration]:
    namespace, default_key = library
    method = fn.rsplit(".", 1)[1]
    if method == "impl" and args:
        name = _py_op(args[0])
        key_node = kwargs.get("dispatch_key") or (args[2] if len(args) > 2 else None)
        key = (_py_strings(key_node) or [default_key])[0] or default_key
        if name:
            yield Registration(qualify(name, namespace), namespace, key, "impl", _loc(file, call))
    elif method == "fallback":
        key_node = kwargs.get("dispatch_key") or (args[1] if len(args) > 1 else None)
        key = (_py_strings(key_node) or [default_key])[0] or default_key
        yield Registration("*", namespace, key, "fallback", _loc(file, call))


def _ns(name: str) -> str:
    return name.split("::", 1)[0] if "::" in name else "aten"


def _libraries(root: Node) -> dict[str, tuple[str, str]]:
    """``name = torch.library.Library("aten", "IMPL"[, key])`` -> {name: (namespace, key)}."""
    found: dict[str, tuple[str, str]] = {}
    for assign in _walk(root, "assignment"):
        value = assign.child_by_field_name("right")
        if value is None or value.type != "call":
            continue
        if _text(value.child_by_field_name("function")).rsplit(".", 1)[-1] != "Library":
            continue
        args, kwargs = _py_args(value)
        strings = [_py_strings(a) for a in args]
        if len(strings) >= 2 and strings[0] and strings[1] and strings[1][0] in ("IMPL", "FRAGMENT", "DEF"):
            key = strings[2][0] if len(strings) > 2 and strings[2] else (_py_strings(kwargs.get("dispatch_key")) or [""])[0]
            found[_text(assign.child_by_field_name("left"))] = (strings[0][0], key)
    return found


def _py_args(call: Node) -> tuple[list[Node], dict[str, Node]]:
    args: list[Node] = []
    kwargs: dict[str, Node] = {}
    arg_list = call.child_by_field_name("arguments")
    for node in arg_list.named_children if arg_list is not None else []:
        if node.type == "keyword_argument":
            value = node.child_by_field_name("value")
            if value is not None:
                kwargs[_text(node.child_by_field_name("name"))] = value
        elif node.type != "comment":
            args.append(node)
    return args, kwargs


def _py_strings(node: Node | None) -> list[str]:
    """A string literal, or a list/tuple of them, as Python strings."""
    if node is None:
        return []
    if node.type == "string":
        return ["".join(_text(c) for c in node.named_children if c.type == "string_content")]
    if node.type in ("list", "tuple"):
        return [s for child in node.named_children for s in _py_strings(child)]
    return []


def _py_op(node: Node) -> str | None:
    """An op given as a string or as ``torch.ops.aten.add.Tensor``."""
    strings = _py_strings(node)
    if strings:
        return strings[0]
    match = _OPS_ATTR_RE.match(_text(node))
    if match is None:
        return None
    ns, name, overload = match.groups()
    return f"{ns}::{name}" + (f".{overload}" if overload and overload != "default" else "")
