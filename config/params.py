"""``edits.params``: exclusions by the value of any ``@parametrize`` argument.

A config names a value the way a reader finds it: as it appears in instance names
(``test_pool_shape_2x3_reduction_mean_cpu`` -> ``2x3``, ``mean``), or as the Python literal
of the live value (``(2, 3)``, ``'mean'``). An instance's identity keeps each parameter as
the ``repr`` of its live value (core/names.py); :func:`value_forms` derives from it every
form PyTorch's naming produces: the value itself (``mean``, ``3``, ``True``), with ``.``
made ``_`` (``0_5``, as ``parametrize`` writes floats), and a sequence joined by ``x``
(``2x3``, the usual ``subtest(..., name=...)`` spelling of a shape).

``validate`` with the upstream file at hand checks each excluded parameter name against the
test's ``@parametrize`` arguments, read with :mod:`ast` (never imported).
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from testcurator.config.schema import Edits
from testcurator.names import TestIdentity

PARAMETRIZE_DECORATORS = frozenset({"parametrize", "parametrize_test"})


# ``<class 'mod.Name'>``, ``<function name at 0x7f...>``: the name is the stable part.
_NAMED_REPR = re.compile(r"^<(?:class '([\w.]+)'|function ([\w.<>]+) at 0x[0-9a-f]+)>$")
# A repr carrying an address differs in every process: no config value can name it.
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


@lru_cache(maxsize=4096)
def value_forms(text: str) -> frozenset[str]:
    """Every spelling of a parameter value whose ``repr`` is ``text``."""
    forms = {text}
    named = _NAMED_REPR.match(text)
    if named:  # a class or function (``name_fn=lambda x: x.__name__`` is PyTorch's idiom)
        return frozenset({text, (named.group(1) or named.group(2)).rsplit(".", 1)[-1]})
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return frozenset(forms)  # torch.float32, <object at 0x...>: the repr is all there is
    forms |= {str(value), str(value).replace(".", "_")}
    if isinstance(value, (tuple, list)) and all(isinstance(v, (int, float, str, bool)) for v in value):
        forms.add("x".join(str(v) for v in value))
    return frozenset(forms)


def config_value(value: Any) -> str:
    return str(value)


def spelling(text: str, others: Iterable[str] = ()) -> str | None:
    """The config value that names the parameter value whose ``repr`` is ``text`` and none of
    ``others`` (the reprs of the argument's other values): the readable form when it is
    unambiguous (``mean``, ``3``, ``2x3``), else the Python literal itself (``'3'`` beside 3);
    None when every spelling of it also names another value (3 beside ``'3'``)."""
    rivals = [o for o in others if o != text]
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        value = None
    readable = sorted(value_forms(text) - {text}) if _NAMED_REPR.match(text) else []
    if isinstance(value, (tuple, list)):
        readable.append("x".join(str(v) for v in value))
    elif isinstance(value, (str, int, float, bool)):
        readable.append(str(value))
    for candidate in (*readable, *(() if _ADDRESS.search(text) else (text,))):
        if candidate in value_forms(text) and not any(candidate in value_forms(o) for o in rivals):
            return candidate
    return None


def param_ref(name: str, value: str) -> str:
    """``shape=2x3``: one excluded value as decisions and review name it."""
    return f"{name}={value}"


def split_param_ref(ref: str) -> tuple[str, str]:
    """The inverse of :func:`param_ref` (an argument name never holds ``=``)."""
    name, _, value = ref.partition("=")
    return name, value


def excludes(refs: Iterable[str], params: Iterable[tuple[str, str]]) -> bool:
    """Whether one of ``refs`` (``name=value``) names one of an instance's ``params``."""
    given = dict(params)
    for ref in refs:
        name, value = split_param_ref(ref)
        if name in given and value in value_forms(given[name]):
            return True
    return False


def excluded_param(edits: Edits | None, ident: TestIdentity) -> str | None:
    """``shape=2x3`` when ``edits.params`` excludes one of the instance's values."""
    if edits is None or edits.params is None or not ident.params:
        return None
    given = dict(ident.params)
    for ref in edits.params.exclude:
        text = given.get(ref.name)
        if text is None:
            continue
        forms = value_forms(text)
        for value in ref.values:
            if config_value(value) in forms:
                return f"{ref.name}={config_value(value)}"
    return None


def parametrized_args(path: Path) -> dict[str, frozenset[str]]:
    """``Class::test`` -> its ``@parametrize`` argument names, for every test in ``path``
    that has one (read with ast; empty when unreadable)."""
    try:
        stat = os.stat(path)
    except OSError:
        return {}
    return _parametrized_args(str(path), stat.st_mtime_ns, stat.st_size)


def _name_of(node: ast.expr) -> str:
    """``parametrize`` of ``parametrize`` and of ``common_utils.parametrize``; else ""."""
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _is_parametrize(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and bool(node.args) and _name_of(node.func) in PARAMETRIZE_DECORATORS


def _parametrize_names(call: ast.Call) -> set[str] | None:
    """``parametrize("a,b", ...)`` -> {a, b}; None when the name list is computed."""
    first = call.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return None
    return {n.strip() for n in first.value.split(",") if n.strip()}


def _module_aliases(tree: ast.Module) -> dict[str, set[str]]:
    """Module-level ``parametrize_x = parametrize("x", [...])``, applied as ``@parametrize_x``
    (upstream test_subclass does this)."""
    out: dict[str, set[str]] = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call) and _is_parametrize(node.value)):
            names = _parametrize_names(node.value)
            if names is not None:
                out[node.targets[0].id] = names
    return out


# Bare decorators PyTorch's tests use that never parametrize (``@onlyCPU``, ``@skipMeta``,
# ``@unittest.expectedFailure``...): with them the check stays exact. Name prefixes.
_PLAIN = re.compile(r"only|skip|slow|expected|serial|large|tf32|with_|requires|set_default|deviceCountAtLeast|"
                    r"precision|toleranceOverride|xfail|staticmethod|classmethod|property|wraps|torch_|dtypes|"
                    r"ops|modules|unMarkDynamoStrictTest|markDynamoStrictTest|pytorch_test")


def _decorator_args(fn: ast.FunctionDef | ast.AsyncFunctionDef, aliases: dict[str, set[str]]) -> set[str] | None:
    """Names from ``@parametrize("a,b", ...)`` and module-level aliases of one; None when a
    name list is computed, or a bare decorator is a name this file does not define as one
    (it may be a parametrizer imported from elsewhere)."""
    names: set[str] = set()
    for deco in fn.decorator_list:
        if isinstance(deco, ast.Name) and deco.id in aliases:
            names |= aliases[deco.id]
        elif isinstance(deco, (ast.Name, ast.Attribute)) and not _PLAIN.match(_name_of(deco)):
            return None
        elif isinstance(deco, ast.Call) and _is_parametrize(deco):
            found = _parametrize_names(deco)
            if found is None:
                return None
            names |= found
    return names


@lru_cache(maxsize=64)
def _parametrized_args(path: str, mtime_ns: int, size: int) -> dict[str, frozenset[str]]:
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return {}
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    aliases = _module_aliases(tree)

    def tests(name: str, seen: frozenset[str] = frozenset()) -> dict[str, frozenset[str]]:
        node = classes.get(name)
        if node is None or name in seen:
            return {}
        out: dict[str, frozenset[str]] = {}
        for base in node.bases:
            if isinstance(base, ast.Name):
                out.update(tests(base.id, seen | {name}))
        for fn in node.body:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name.startswith("test"):
                found = _decorator_args(fn, aliases)
                if found is None:  # names it cannot read: any argument of the function may be one
                    found = {a.arg for a in fn.args.args[1:]}
                out[fn.name] = frozenset(found)
        return out

    return {f"{cls}::{test}": args for cls in classes for test, args in tests(cls).items()}


def unknown_params(names: Iterable[str], generic: str, known: dict[str, frozenset[str]]) -> list[str]:
    """A message per parameter name the test does not take (nothing when the test is not found)."""
    if generic not in known:
        return []
    args = known[generic]
    have = f"its @parametrize arguments: {', '.join(sorted(args))}" if args else "it has no @parametrize arguments"
    return [f"unknown parameter {name!r} for {generic} ({have})" for name in names if name not in args]
