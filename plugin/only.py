"""``--curate-only FILE``: run only the tests FILE names, one ``path::Class::test`` a line.

A line names a generic test (every instance of it) or, followed by a tab and its generic
name, one instance by its key (:func:`testcurator.vocab.instance_key`:
``path::Class::test_bar_openreg_float32<TAB>Class::test_bar``, the generic class and the
instance's own name). The runner's reruns (the tests a crashed
process left, retries of failures) select by instance key: a node id recorded in another
process may name another class (OpenReg's ``TestFooPRIVATEUSE1`` / ``TestFooOPENREG``).

A delta run (``testcurator upgrade``) re-evaluates a few tests of the files it touches: at
collection every other item is deselected, by the generic name the plugin maps it to
(``plugin/identity.py`` ``item_identity``), exactly and at a constant cost per item. ``-k``
with the delta's names did this before: it matched substrings (``test_add`` kept
``test_add_inplace``), cost names x items (seconds at a few hundred names), and pytest's
expression parser fails (RecursionError) beyond about 800 names, a 5% upgrade of a
PyTorch-size tree. Paths are absolute or relative to the rootdir.

Tests FILE does not name are not even instantiated: before PyTorch's
``instantiate_device_type_tests`` / ``instantiate_parametrized_tests`` expand a class, the
class loses its test functions whose name no line of FILE has (in any class, any file: a
subclass elsewhere inherits them). A changed test in ``test_ops.py`` then costs its own
instances, not the tens of thousands of the file's others; deselection still decides, by
identity, among what is left. A kept test that calls another test function by name would
not find it. Only while pytest collects: a test that builds and instantiates its own class
when it runs (upstream test_testing's ``TestTestParametrization``: ``8 != 5`` names) gets
every function of it, as without this plugin; narrowed, 17 of them failed on CPU only in
the capture and were decided xfail. A module-level class none of whose tests FILE names (for that file) is not
collected at all: collecting a PyTorch ``TestCase`` class scans its hundreds of inherited
attributes for fixtures, which was a third of a delta run's collection on a generated tree.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from testcurator.names import generic_classes
from testcurator.plugin.identity import item_identity
from testcurator.plugin.optionset import existing_file, first_time
from testcurator.vocab import TestKey, instance_key, split_name

PLUGIN_NAME = "testcurator-only"


def add_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    if not first_time(parser, "only"):
        return
    group.addoption("--curate-only", dest="curate_only", type=existing_file("test list"), default=None, metavar="FILE",
                    help="run only the tests FILE names (one a line: path::Class::test for every instance of a "
                         "test, or one instance's key path::Class::test_bar_<device>_<dtype>), deselect the rest")


def configure(config: pytest.Config) -> None:
    path = config.getoption("curate_only", None)
    if path is None or config.pluginmanager.has_plugin(PLUGIN_NAME):
        return
    config.pluginmanager.register(OnlyPlugin(*read_keys(path, config.rootpath)), PLUGIN_NAME)


def read_keys(path: Path, rootdir: Path) -> tuple[frozenset[tuple[str, str]], frozenset[str]]:
    """(resolved file, ``Class::test`` or instance name) of every line of ``path``, and the
    generic test functions the lines need instantiated."""
    keys, functions = set(), set()
    for line in path.read_text(encoding="utf-8").splitlines():
        text, _, generic = line.strip().partition("\t")
        if text:
            key = TestKey.parse(text)
            keys.add((str((rootdir / key.file).resolve()), key.name))
            functions.add(split_name(generic.strip() or key.name)[1].partition("[")[0])
    return frozenset(keys), frozenset(functions)


def write_keys(path: Path, keys: Iterable[TestKey], root: Path | None,
               instances: Iterable[tuple[str, str]] = ()) -> Path:
    """A ``--curate-only`` file: a line per generic test of ``keys``, then a line per instance
    of ``instances`` (instance key, generic name), each sorted (the same keys give the same
    file). Files are made absolute against ``root`` (resolved); ``root`` None leaves them as
    given, for pytest to read relative to its rootdir."""
    def line(key: TestKey) -> str:
        return str(key) if root is None else str(TestKey.of(str((root / key.file).resolve()), key.name))

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join([f"{line(k)}\n" for k in sorted(keys, key=str)]
                            + [f"{line(TestKey.parse(key))}\t{generic}\n" for key, generic in sorted(instances)]),
                    encoding="utf-8")
    return path


# (module, function) of PyTorch that expand a generic test class into its instances.
_INSTANTIATORS = (("torch.testing._internal.common_device_type", "instantiate_device_type_tests"),
                  ("torch.testing._internal.common_utils", "instantiate_parametrized_tests"))


def narrowed(instantiate: Callable[..., Any], names: frozenset[str],
             active: Callable[[], bool] = lambda: True) -> Callable[..., Any]:
    """``instantiate`` applied to the class without the test functions not in ``names``,
    while ``active()``; ``instantiate`` itself otherwise."""

    @functools.wraps(instantiate)
    def wrapper(generic_cls: type, *args: Any, **kwargs: Any) -> Any:
        if not active():  # a test module binds the wrapper for good: it outlives collection
            return instantiate(generic_cls, *args, **kwargs)
        # Functions only: a class attribute like ``test_cases = [...]`` is data a kept test reads.
        for attr in [a for a, v in vars(generic_cls).items() if a.startswith("test") and inspect.isfunction(v)]:
            if attr not in names:
                delattr(generic_cls, attr)
        return instantiate(generic_cls, *args, **kwargs)

    return wrapper


class OnlyPlugin:
    def __init__(self, wanted: frozenset[tuple[str, str]], functions: frozenset[str]) -> None:
        self.wanted = wanted
        self.functions = functions
        self._by_file: dict[str, set[str]] = {}
        for file, name in wanted:
            self._by_file.setdefault(file, set()).add(name)
        self._classes = {file: {split_name(name)[0] for name in names} for file, names in self._by_file.items()}
        self._restore: list[tuple[Any, str, Any]] = []
        self._patched = False
        self._collecting = True

    def names_in(self, file: Path) -> frozenset[str]:
        """The tests (``Class::test``) of ``file`` that FILE names."""
        return frozenset(self._by_file.get(str(file.resolve()), ()))

    def pytest_collectstart(self, collector: pytest.Collector) -> None:
        # Before the first test module imports (test files bind the functions at import);
        # not at configure: an xdist controller never collects and need not import torch.
        if self._patched or not isinstance(collector, pytest.Module):
            return
        self._patched = True
        names = self.functions
        for module_name, function in _INSTANTIATORS:
            try:
                module = __import__(module_name, fromlist=[function])
            except ImportError:  # no torch: nothing PyTorch would instantiate
                return
            original = getattr(module, function)
            self._restore.append((module, function, original))
            setattr(module, function, narrowed(original, names, lambda: self._collecting))

    def pytest_collection_finish(self) -> None:
        self._collecting = False  # what a test instantiates as it runs is its own business

    @pytest.hookimpl(tryfirst=True)
    def pytest_pycollect_makeitem(self, collector: pytest.Collector, name: str, obj: object) -> list[Any] | None:
        """No collection at all for a module's test class whose tests FILE does not name."""
        if not (isinstance(collector, pytest.Module) and inspect.isclass(obj)):
            return None
        wanted = self._classes.get(str(collector.path.resolve()), set())
        return None if generic_classes(obj) & wanted else []

    def pytest_unconfigure(self) -> None:
        for module, function, original in self._restore:
            setattr(module, function, original)
        self._restore.clear()

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        keep, drop = [], []
        resolved: dict[Path, str] = {}
        for item in items:
            path = Path(str(item.path))
            file = resolved.get(path) or resolved.setdefault(path, str(path.resolve()))
            generic = item_identity(item).generic
            instance = TestKey.parse(instance_key(item.nodeid, generic)).name
            (keep if (file, generic) in self.wanted or (file, instance) in self.wanted else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser.getgroup("curate"), parser)


def pytest_configure(config: pytest.Config) -> None:
    configure(config)
