"""What a static test-file index holds, and which tests pytest collects from it.

The dataclasses are filled by :func:`testcurator.memory.index.parse_source`; then
:func:`collect_tests` resolves inheritance and which classes pytest collects, so a test
inherited from a base in the same file appears once per test class that inherits it, as
``Class::test``, with an estimate of its instances per device.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field, replace

from testcurator.names import KNOWN_DEVICES
from testcurator.vocab import join_name

# Bases (by last dotted part) that make a class a unittest TestCase for pytest.
_TESTCASE_BASE_RE = re.compile(r"(TestCase|TestBase|Test)$")


@dataclass(frozen=True)
class Decorator:
    name: str  # dotted callee as written: "ops", "unittest.skipIf"
    args: tuple[str, ...] = ()  # positional argument sources ("*floating_types()" kept)
    kwargs: tuple[tuple[str, str], ...] = ()
    line: int = 0

    @property
    def short(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    def text(self) -> str:
        parts = list(self.args) + [f"{k}={v}" for k, v in self.kwargs]
        return f"@{self.name}({', '.join(parts)})" if parts or self.args else f"@{self.name}"


@dataclass(frozen=True)
class TestFunction:
    """One ``def test*`` as written in the source (before inheritance)."""

    __test__ = False  # not a pytest test class, despite the name

    name: str
    defined_in: str | None  # class whose body holds the def; None at module level
    line_start: int  # 1-based, first decorator line
    line_end: int
    decorators: tuple[Decorator, ...]
    calls: tuple[str, ...]  # torch symbols called, resolved through imports
    methods: tuple[str, ...]  # method names called on non-self objects (x.add_ -> add_)
    docstring: str | None
    content_hash: str


@dataclass(frozen=True)
class ClassInfo:
    name: str
    line: int
    bases: tuple[str, ...]
    decorators: tuple[Decorator, ...]
    tests: tuple[TestFunction, ...]


@dataclass(frozen=True)
class Instantiation:
    cls: str
    kind: str  # "device" | "parametrized"
    line: int
    only_for: tuple[str, ...] | None = None
    except_for: tuple[str, ...] | None = None


@dataclass(frozen=True)
class IndexedTest:
    """One generic test of a file's static index: ``Class::test`` (or bare ``test`` at
    module level), as pytest would collect it."""

    __test__ = False

    cls: str | None
    fn: TestFunction
    device_generic: bool
    parametrized: bool
    instances_estimate: int | None  # on CPU (Memory.instances_on: any device); None = not static

    @property
    def generic(self) -> str:
        return join_name(self.cls or "", self.fn.name)


@dataclass(frozen=True)
class FileIndex:
    path: str
    classes: tuple[ClassInfo, ...] = ()
    module_tests: tuple[TestFunction, ...] = ()
    instantiations: tuple[Instantiation, ...] = ()
    deleted: frozenset[str] = frozenset()
    tests: tuple[IndexedTest, ...] = ()
    error: str | None = None  # set when the file could not be indexed (then no tests)
    warnings: tuple[str, ...] = field(default_factory=tuple)


# -- which tests pytest will collect, and how many instances each yields -------------------


def _mro(name: str, classes: dict[str, ClassInfo]) -> list[str]:
    """In-file linearisation (depth-first, last occurrence wins: close to C3 for tests)."""
    order: list[str] = []

    def visit(n: str, seen: frozenset[str]) -> None:
        order.append(n)
        for base in classes[n].bases:
            if base in classes and base not in seen:
                visit(base, seen | {base})

    visit(name, frozenset({name}))
    out: list[str] = []
    for i, n in enumerate(order):
        if n not in order[i + 1 :]:
            out.append(n)
    return out


def _is_test_class(name: str, mro: list[str], classes: dict[str, ClassInfo]) -> bool:
    # pytest collects TestCase subclasses whatever their name, and plain "Test*" classes.
    if name.startswith("Test"):
        return True
    for klass in mro:
        for base in classes[klass].bases:
            if base not in classes and _TESTCASE_BASE_RE.search(base.rsplit(".", 1)[-1]):
                return True
    return False


def collect_tests(index: FileIndex) -> FileIndex:
    """The generic tests of a parsed file, one per (collected class, test name)."""
    classes = {c.name: c for c in index.classes}
    kinds: dict[str, set[str]] = {}
    for inst in index.instantiations:
        kinds.setdefault(inst.cls, set()).add(inst.kind)
    records: list[IndexedTest] = []
    for cls in index.classes:
        mro = _mro(cls.name, classes)
        device = "device" in kinds.get(cls.name, ())
        if not device and (cls.name in index.deleted or not _is_test_class(cls.name, mro, classes)):
            continue
        tests: dict[str, TestFunction] = {}
        for klass in reversed(mro):
            for fn in classes[klass].tests:
                tests[fn.name] = fn
        for fn in tests.values():
            # instantiate_* expands a class's own tests (its __dict__); subclasses inherit the
            # expanded ones, so what counts is where the test is defined.
            own_device = device and fn.defined_in == cls.name
            param = own_device or "parametrized" in kinds.get(fn.defined_in or "", ())
            records.append(IndexedTest(cls.name, fn, own_device, param,
                                      estimate_instances(fn.decorators, own_device, param)))
    for fn in index.module_tests:
        pytest_param = any(d.name.endswith("mark.parametrize") for d in fn.decorators)
        records.append(IndexedTest(None, fn, False, pytest_param,
                                  estimate_instances(fn.decorators, False, pytest_param)))
    return replace(index, tests=tuple(records))


def _literal_len(text: str) -> int | None:
    """Number of values in a literal list/tuple/range/product expression, else None."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None
    return _node_len(node)


def _node_len(node: ast.expr) -> int | None:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return None if any(isinstance(e, ast.Starred) for e in node.elts) else len(node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
        fname = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
        if fname == "range" and not node.keywords:
            try:
                return len(range(*(ast.literal_eval(a) for a in node.args)))
            except (ValueError, TypeError):
                return None
        if fname == "product" and not node.keywords:
            total = 1
            for arg in node.args:
                n = _node_len(arg)
                if n is None:
                    return None
                total *= n
            return total
    return None


def _param_values(deco: Decorator) -> str | None:
    kw = dict(deco.kwargs)
    if len(deco.args) > 1:
        return deco.args[1]
    return kw.get("arg_values", kw.get("argvalues"))


def per_device_decorator(device: str) -> str:
    """``@dtypesIf...`` that applies on ``device``: ``cpu`` -> ``dtypesIfCPU``; an out-of-tree
    backend's own name (``curatedev``) is the ``privateuse1`` device type."""
    kind = device.split(":", 1)[0].lower()
    return f"dtypesIf{(kind if kind in KNOWN_DEVICES else 'privateuse1').upper()}"


def estimate_instances(decos: tuple[Decorator, ...], device: bool, parametrized: bool,
                       device_type: str = "cpu") -> int | None:
    """Instances on ``device_type``; None when not statically knowable. Per-device
    decorators (``@dtypesIfCUDA``...) count on their own device only."""
    total = 1
    if device:
        if any(d.short in ("ops", "modules") for d in decos):
            return None  # depends on op_db / module_db at import time
        by_name = {d.short: d for d in decos}
        dtypes = by_name.get(per_device_decorator(device_type)) or by_name.get("dtypes")
        if dtypes is not None and (dtypes.args or dtypes.kwargs):
            if dtypes.kwargs:
                return None
            # @dtypes(*product((a, b), (c,))) is upstream's way to pass dtype tuples.
            counts = [_literal_len(a[1:]) if a.startswith("*") else 1 for a in dtypes.args]
            if None in counts:
                return None
            total *= sum(c for c in counts if c is not None)
    if parametrized:
        for deco in decos:
            if deco.short not in ("parametrize", "parametrize_test"):
                continue
            values = _param_values(deco)
            count = _literal_len(values) if values is not None else None
            if count is None:
                return None
            total *= count
    return total
