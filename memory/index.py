"""Static index of PyTorch-style test files with tree-sitter: pure functions -> dataclasses.

One parse per file yields classes (bases, decorators, own test functions), module-level
tests, ``instantiate_*`` calls and module-level ``del``. Then
:func:`~testcurator.memory.collect.collect_tests` resolves inheritance and which classes
pytest collects, so a test inherited from a base in the same file appears once per test
class that inherits it, as ``Class::test``.

Content hash: sha256 over the dedented source of decorators + ``def`` with the function
NAME replaced by ``_`` (and without line numbers, class name or trailing whitespace). So a
test moved within a file, into another class, or re-indented keeps its hash; a renamed test
with the same body keeps it too, which lets a later delta detect "renamed" (the name is
stored separately). Tests sharing a body share a hash.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import re
import textwrap
import warnings
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from tree_sitter import Language, Node, Parser, Query, QueryCursor

from testcurator.memory.collect import ClassInfo, Decorator, FileIndex, Instantiation, TestFunction, collect_tests

_DOTTED_RE = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")
_INSTANTIATORS = {"instantiate_device_type_tests": "device", "instantiate_parametrized_tests": "parametrized"}
_COMPOUND = {"if_statement", "try_statement", "with_statement", "elif_clause", "else_clause",
             "except_clause", "finally_clause", "block", "except_group_clause"}


@lru_cache(maxsize=1)
def _language() -> Language:
    import tree_sitter_python

    return Language(tree_sitter_python.language())


@lru_cache(maxsize=1)
def _calls_query() -> Query:
    return Query(_language(), "(call function: (_) @f)")


def make_parser() -> Parser:
    return Parser(_language())


def _text(src: bytes, node: Node) -> str:
    return src[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _walk_module(node: Node) -> Iterator[Node]:
    """Module-level statements, descending into if/try/with blocks (guarded definitions)."""
    for child in node.named_children:
        if child.type in _COMPOUND:
            yield from _walk_module(child)
        else:
            yield child


def _imports(src: bytes, root: Node) -> dict[str, str]:
    """Local name -> dotted torch path, for module-level imports of torch."""
    out: dict[str, str] = {}
    for st in _walk_module(root):
        if st.type == "import_statement":
            for item in st.named_children:
                if item.type == "aliased_import":
                    full = _text(src, item.child_by_field_name("name"))
                    out[_text(src, item.child_by_field_name("alias"))] = full
                else:
                    full = _text(src, item)
                    out[full.split(".")[0]] = full.split(".")[0]
        elif st.type == "import_from_statement":
            mod = st.child_by_field_name("module_name")
            base = _text(src, mod) if mod is not None else ""
            for item in st.children_by_field_name("name"):
                if item.type == "aliased_import":
                    name = _text(src, item.child_by_field_name("name"))
                    out[_text(src, item.child_by_field_name("alias"))] = f"{base}.{name}"
                else:
                    out[_text(src, item)] = f"{base}.{_text(src, item)}"
    return {k: v for k, v in out.items() if v == "torch" or v.startswith("torch.")}


def _decorator(src: bytes, node: Node) -> Decorator:
    expr = node.named_children[0] if node.named_children else node
    line = node.start_point[0] + 1
    if expr.type != "call":
        return Decorator(name=" ".join(_text(src, expr).split()), line=line)
    fn = expr.child_by_field_name("function")
    args: list[str] = []
    kwargs: list[tuple[str, str]] = []
    arglist = expr.child_by_field_name("arguments")
    for arg in arglist.named_children if arglist is not None else ():
        if arg.type == "keyword_argument":
            key = _text(src, arg.child_by_field_name("name"))
            kwargs.append((key, _text(src, arg.child_by_field_name("value"))))
        elif arg.type != "comment":
            args.append(_text(src, arg))
    return Decorator(name=" ".join(_text(src, fn).split()), args=tuple(args), kwargs=tuple(kwargs), line=line)


def _docstring(src: bytes, body: Node | None) -> str | None:
    if body is None:
        return None
    first = next((c for c in body.named_children if c.type != "comment"), None)
    if first is None or first.type != "expression_statement" or not first.named_children:
        return None
    string = first.named_children[0]
    if string.type not in ("string", "concatenated_string"):
        return None
    raw = _text(src, string)
    quote = raw[:3] if raw[:3] in ('"""', "'''") else raw[:1]
    if string.type == "string" and quote in ('"""', "'''", '"', "'") and raw.endswith(quote) and len(raw) >= 2 * len(quote) \
            and "\\" not in raw:
        value: object = raw[len(quote) : len(raw) - len(quote)]  # plain literal: no eval needed
    else:
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            return None
    return inspect.cleandoc(value) if isinstance(value, str) else None


def content_hash(src: bytes, outer: Node, name_node: Node) -> str:
    """Hash of decorators + def, dedented, with the function name blanked (see module doc)."""
    start, end = outer.start_byte, outer.end_byte
    body = src[start : name_node.start_byte] + b"_" + src[name_node.end_byte : end]
    text = " " * outer.start_point[1] + body.decode("utf-8", "replace")
    lines = [ln.rstrip() for ln in textwrap.dedent(text.replace("\r\n", "\n")).split("\n")]
    return hashlib.sha256("\n".join(ln for ln in lines if ln).encode()).hexdigest()[:16]


@dataclass
class _Calls:
    """Every call in the file, sorted by position, to hand out per test by byte range."""

    starts: list[int]
    names: list[tuple[str, str]]  # (kind "torch"|"method", name)


def _collect_calls(src: bytes, root: Node, aliases: dict[str, str]) -> _Calls:
    # String work on each callee's source is much cheaper than walking its child nodes.
    found: list[tuple[int, str, str]] = []
    for node in QueryCursor(_calls_query()).captures(root).get("f", []):
        text = src[node.start_byte : node.end_byte].decode("utf-8", "replace")
        if any(ch in text for ch in " \n\t\\"):
            text = "".join(text.replace("\\", " ").split())  # callee split over lines
        head, dot, _ = text.partition(".")
        target = aliases.get(head)
        if target is not None and _DOTTED_RE.match(text):
            full = target + text[len(head):]
            if not full.startswith("torch.testing._internal"):
                found.append((node.start_byte, "torch", full))
                continue
        if dot:
            obj, _, method = text.rpartition(".")
            if obj != "self" and method.isidentifier():
                found.append((node.start_byte, "method", method))
    found.sort()
    return _Calls([f[0] for f in found], [(f[1], f[2]) for f in found])


def _calls_in(calls: _Calls, start: int, end: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    torch_calls: dict[str, None] = {}
    methods: dict[str, None] = {}
    i = bisect_left(calls.starts, start)
    while i < len(calls.starts) and calls.starts[i] < end:
        kind, name = calls.names[i]
        (torch_calls if kind == "torch" else methods)[name] = None
        i += 1
    return tuple(sorted(torch_calls)), tuple(sorted(methods))


def _unwrap(src: bytes, node: Node) -> tuple[Node, tuple[Decorator, ...]]:
    """(definition, decorators) for a decorated_definition or a bare definition."""
    if node.type == "decorated_definition":
        decos = tuple(_decorator(src, d) for d in node.named_children if d.type == "decorator")
        return node.child_by_field_name("definition"), decos
    return node, ()


def _test_function(src: bytes, outer: Node, defn: Node, decos: tuple[Decorator, ...],
                   owner: str | None, calls: _Calls) -> TestFunction | None:
    name_node = defn.child_by_field_name("name")
    name = _text(src, name_node)
    if not name.startswith("test"):
        return None
    torch_calls, methods = _calls_in(calls, defn.start_byte, defn.end_byte)
    return TestFunction(
        name=name, defined_in=owner, line_start=outer.start_point[0] + 1,
        line_end=outer.end_point[0] + 1, decorators=decos, calls=torch_calls, methods=methods,
        docstring=_docstring(src, defn.child_by_field_name("body")),
        content_hash=content_hash(src, outer, name_node),
    )


def _class_info(src: bytes, outer: Node, defn: Node, decos: tuple[Decorator, ...], calls: _Calls) -> ClassInfo:
    name = _text(src, defn.child_by_field_name("name"))
    supers = defn.child_by_field_name("superclasses")
    bases = tuple(
        " ".join(_text(src, b).split()) for b in (supers.named_children if supers is not None else ())
        if b.type not in ("keyword_argument", "comment")
    )
    tests: dict[str, TestFunction] = {}  # later definitions win, as in Python
    for st in _walk_module(defn.child_by_field_name("body")):
        inner, inner_decos = _unwrap(src, st)
        if inner is not None and inner.type == "function_definition":
            fn = _test_function(src, st, inner, inner_decos, name, calls)
            if fn is not None:
                tests[fn.name] = fn
    return ClassInfo(name, outer.start_point[0] + 1, bases, decos, tuple(tests.values()))


def _literal_strings(src: bytes, node: Node | None) -> tuple[str, ...] | None:
    if node is None:
        return None
    raw = _text(src, node)
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return (raw,)  # not literal: keep the expression so a reader sees it
    if value is None:
        return None
    return (value,) if isinstance(value, str) else tuple(str(v) for v in value)


def _instantiation(src: bytes, call: Node) -> Instantiation | None:
    fn = call.child_by_field_name("function")
    kind = _INSTANTIATORS.get(_text(src, fn).rsplit(".", 1)[-1]) if fn is not None else None
    arglist = call.child_by_field_name("arguments")
    if kind is None or arglist is None:
        return None
    positional = [a for a in arglist.named_children if a.type not in ("keyword_argument", "comment")]
    keywords = {_text(src, a.child_by_field_name("name")): a.child_by_field_name("value")
                for a in arglist.named_children if a.type == "keyword_argument"}
    if not positional:
        return None
    # instantiate_device_type_tests(cls, scope, except_for=None, only_for=None, ...)
    except_for = keywords.get("except_for", positional[2] if len(positional) > 2 else None)
    only_for = keywords.get("only_for", positional[3] if len(positional) > 3 else None)
    return Instantiation(
        cls=_text(src, positional[0]), kind=kind, line=call.start_point[0] + 1,
        only_for=_literal_strings(src, only_for) if kind == "device" else None,
        except_for=_literal_strings(src, except_for) if kind == "device" else None,
    )


def compile_error(src: bytes, path: str) -> str | None:
    """Why CPython would refuse to import ``src`` (None if it would not).

    tree-sitter recovers from errors silently and misses indentation errors altogether,
    while pytest collects nothing from a file that does not compile. CPython's compiler
    (to bytecode, cheaper than building an ``ast``) is the judge, as it is for pytest.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning for "\\d" escapes and the like
            compile(src, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"syntax error at line {exc.lineno}: {exc.msg}"
    except ValueError as exc:  # e.g. null bytes
        return f"cannot compile: {exc}"
    return None


def parse_source(src: bytes, path: str, parser: Parser | None = None) -> FileIndex:
    """Index one file's bytes. A syntax error yields ``FileIndex(error=...)`` and no tests."""
    error = compile_error(src, path)
    if error is not None:
        return FileIndex(path=path, error=error)
    root = (parser or make_parser()).parse(src).root_node
    notes: tuple[str, ...] = ()
    if root.has_error:
        notes = ("tree-sitter reported errors on a file Python compiles; index may be partial",)
    calls = _collect_calls(src, root, _imports(src, root))
    classes: dict[str, ClassInfo] = {}
    module_tests: dict[str, TestFunction] = {}
    insts: list[Instantiation] = []
    deleted: set[str] = set()
    for st in _walk_module(root):
        defn, decos = _unwrap(src, st)
        if defn is None:
            continue
        if defn.type == "class_definition":
            info = _class_info(src, st, defn, decos, calls)
            classes[info.name] = info
            if any(d.short == "instantiate_parametrized_tests" for d in decos):
                insts.append(Instantiation(info.name, "parametrized", info.line))
        elif defn.type == "function_definition":
            fn = _test_function(src, st, defn, decos, None, calls)
            if fn is not None:
                module_tests[fn.name] = fn
        elif st.type == "expression_statement" and st.named_children and st.named_children[0].type == "call":
            inst = _instantiation(src, st.named_children[0])
            if inst is not None:
                insts.append(inst)
        elif st.type == "delete_statement":
            deleted.update(n.strip() for n in _text(src, st)[3:].split(","))
    index = FileIndex(path, tuple(classes.values()), tuple(module_tests.values()), tuple(insts),
                      frozenset(deleted), warnings=notes)
    return collect_tests(index)
