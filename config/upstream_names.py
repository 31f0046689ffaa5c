"""What is known about upstream test names, to turn an instantiated name into its generic one
and to check a config against the tree without importing it (``validate --level 2``).

Two sources, used by the loader only when a config names a test by an instantiated name
(``TestCommonCPU::test_out_argument_add_cpu_float32``) and the right generic name must be
suggested:

- :func:`defined_tests`: the ``Class::test`` names an upstream file defines, read with
  :mod:`ast` (never imported: upstream modules run code at import), methods inherited from
  classes of the same file included. Exact: ``test_out_argument`` is a test, ``add`` is not.
- :func:`variant_names`: every OpInfo and ModuleInfo name as PyTorch formats it into test
  names (``add``, ``nn_functional_relu``, ``nn_Linear``), from ``op_db``, ``module_db`` and
  the other ``*_db`` lists of the installed torch. Used when the upstream file is not at hand; imported once, lazily
  (a few seconds), only when an instantiated name was found.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# Decorators that give a test its dtypes (common_device_type): @dtypes for every device,
# @dtypesIfCUDA and the like for one. An excluded dtype must occur in one of them.
_DTYPE_DECORATORS = ("dtypes", "dtypesIf")
# common_utils' @parametrize and its alias: ``@parametrize_test("dtype", [torch.float32, ...])``
# gives the instances a dtype too (the plugin reads it from the instance's param_kwargs).
_PARAMETRIZE = ("parametrize", "parametrize_test")


@dataclass(frozen=True)
class TestFacts:
    """What the source says about one test, read statically (for validate --level 2)."""

    __test__ = False  # not a pytest test class, despite the name

    dtypes: frozenset[str] | None  # literal dtypes over every device; None: not statically known
    ops: bool  # an @ops test (OpInfo variants)
    modules: bool  # a @modules test (ModuleInfo variants)


def defined_tests(path: Path) -> frozenset[str]:
    """``Class::test`` for every test method of every class in ``path`` (empty if unreadable)."""
    return frozenset(name for name in test_facts(path) if "::" in name)


def test_facts(path: Path) -> dict[str, TestFacts]:
    """Per ``Class::test`` (methods, inherited ones of the same file included) and per
    module-level ``test_x`` function, what its decorators say; empty if unreadable."""
    try:
        stat = os.stat(path)
    except OSError:
        return {}
    return _test_facts(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _test_facts(path: str, mtime_ns: int, size: int) -> dict[str, TestFacts]:
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return {}
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}

    def methods(name: str, seen: frozenset[str] = frozenset()) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
        node = classes.get(name)
        if node is None or name in seen:
            return {}
        own: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for base in reversed(node.bases):
            if isinstance(base, ast.Name):
                own.update(methods(base.id, seen | {name}))
        own.update({f.name: f for f in node.body
                    if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name.startswith("test")})
        return own

    aliases = _partial_aliases(tree)
    out = {f"{cls}::{test}": _facts(fn, aliases) for cls in classes for test, fn in methods(cls).items()}
    out.update({fn.name: _facts(fn, aliases) for fn in tree.body
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name.startswith("test")})
    return out


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")


def _partial_aliases(tree: ast.Module) -> dict[str, str]:
    """``_gradcheck_ops = partial(ops, ...)`` (in the module or a class body) -> {``_gradcheck_ops``:
    ``ops``}: a decorator under another name (upstream test_ops_gradients, test_ops_fwd_gradients,
    test_ops_jit's ``_variant_ops`` and ``_alias_ops``)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and node.value.args
                and _decorator_name(node.value) == "partial"):
            out.update({t.id: _decorator_name(node.value.args[0]) for t in node.targets if isinstance(t, ast.Name)})
    return out


def _facts(fn: ast.FunctionDef | ast.AsyncFunctionDef, aliases: dict[str, str]) -> TestFacts:
    names = [aliases.get(name, name) for name in map(_decorator_name, fn.decorator_list)]
    dtypes: set[str] | None = set()
    for deco, name in zip(fn.decorator_list, names):
        if name in _PARAMETRIZE and isinstance(deco, ast.Call) and deco.args and "dtype" in ast.unparse(deco.args[0]):
            dtypes = _parametrized_dtypes(deco, dtypes)
            continue
        if dtypes is not None and name.startswith(_DTYPE_DECORATORS) and isinstance(deco, ast.Call):
            dtypes = _literal_dtypes(deco.args, dtypes)
    if "ops" in names or "modules" in names:
        dtypes = None  # their infos give the dtypes, per device
    return TestFacts(frozenset(dtypes) if dtypes is not None else None, "ops" in names, "modules" in names)


def _parametrized_dtypes(deco: ast.Call, into: set[str] | None) -> set[str] | None:
    """The dtypes of ``@parametrize("dtype", [torch.float32, ...])``; None (unknown) for
    anything else: several names (``"x,dtype"``), values that are not a literal list of dtypes."""
    first, values = deco.args[0], deco.args[1] if len(deco.args) > 1 else None
    if into is None or not (isinstance(first, ast.Constant) and first.value == "dtype"
                            and isinstance(values, (ast.List, ast.Tuple))):
        return None
    return _literal_dtypes(list(values.elts), into)


def _literal_dtypes(args: list[ast.expr], into: set[str]) -> set[str] | None:
    """``torch.float32``, tuples of them (dtype pairs); anything else (a call, ``*``) is unknown."""
    import torch

    for arg in args:
        parts = arg.elts if isinstance(arg, ast.Tuple) else [arg]
        for part in parts:
            if not (isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id == "torch"):
                return None
            value = getattr(torch, part.attr, None)
            if not isinstance(value, torch.dtype):
                return None
            into.add(str(value).split(".", 1)[1])
    return into


@lru_cache(maxsize=1)
def variant_names() -> frozenset[str]:
    """OpInfo and ModuleInfo names as formatted in instantiated test names, and their own
    names (dots as underscores)."""
    try:
        from torch.testing._internal import common_methods_invocations, common_modules
    except Exception:  # noqa: BLE001  (a torch without its testing package: no suggestions from it)
        return frozenset()
    infos: list[object] = []
    for module in (common_methods_invocations, common_modules):
        # op_db, python_ref_db, the foreach/unary/binary subsets, module_db: every *_db list.
        for attr, value in vars(module).items():
            if attr.endswith("_db") and isinstance(value, list):
                infos.extend(value)
    names: set[str] = set()
    for info in infos:
        # An edit may name one variant (formatted_name, ``div_no_rounding_mode``) or the OpInfo
        # itself (``div``: every variant, as the plugin matches it).
        for name in (getattr(info, "formatted_name", None), getattr(info, "name", None)):
            if isinstance(name, str) and name:
                names.add(name.replace(".", "_"))
    return frozenset(names)
