"""What is known about upstream test names, to turn an instantiated name into its generic one.

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
from functools import lru_cache
from pathlib import Path


def defined_tests(path: Path) -> frozenset[str]:
    """``Class::test`` for every test method of every class in ``path`` (empty if unreadable)."""
    try:
        stat = os.stat(path)
    except OSError:
        return frozenset()
    return _defined_tests(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _defined_tests(path: str, mtime_ns: int, size: int) -> frozenset[str]:
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}

    def methods(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        node = classes.get(name)
        if node is None or name in seen:
            return set()
        own = {f.name for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name.startswith("test")}
        for base in node.bases:
            if isinstance(base, ast.Name):
                own |= methods(base.id, seen | {name})
        return own

    return frozenset(f"{cls}::{test}" for cls in classes for test in methods(cls))


@lru_cache(maxsize=1)
def variant_names() -> frozenset[str]:
    """OpInfo and ModuleInfo names as formatted in instantiated test names."""
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
        formatted = getattr(info, "formatted_name", None)
        if isinstance(formatted, str) and formatted:
            names.add(formatted)
    return frozenset(names)
