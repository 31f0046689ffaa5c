"""The pytest entry point (``pytest11``): options, and registration only when they are used.

Like pytest's own plugins, this module only declares the ``curate`` option group; the
objects that do work are registered in :func:`pytest_configure` when their option is
given, so installing testcurator changes nothing for a plain ``pytest`` run.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

import pytest

from testcurator.plugin import capture, events, isolate, labels, only, shard, tiers

_EXTENSIONS = (capture, events, tiers, shard, labels, only, isolate)


def _existing_path(value: str) -> Path:
    path = Path(value)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"config path does not exist: {value}")
    return path


def _existing_dir(value: str) -> Path:
    path = Path(value)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"not a directory: {value}")
    return path


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("curate", "testcurator: apply a curated test-suite config")
    group.addoption(
        "--curate-config",
        dest="curate_config",
        type=_existing_path,
        default=None,
        metavar="PATH",
        help="config file or directory of configs to apply (also ini: curate_config)",
    )
    parser.addini("curate_config", "config file or directory of configs to apply", type="string", default="")
    group.addoption(
        "--curate-torch-root",
        dest="curate_torch_root",
        type=_existing_dir,
        default=None,
        metavar="DIR",
        help="value of ${TORCH_ROOT} in config paths (default: $TORCH_ROOT, else the rootdir)",
    )
    group.addoption(
        "--curate-backend",
        dest="curate_backend",
        default=None,
        metavar="MODULE",
        help="import MODULE (dotted name, or path to a package/.py; MODULE:FUNCTION also calls FUNCTION()) "
        "before collection to register a privateuse1 backend, so device-generic tests instantiate for it",
    )
    for extension in _EXTENSIONS:
        extension.add_options(group, parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    # The backend must be registered before any conftest or test module imports
    # torch.testing._internal.common_device_type, which fixes its device list at import.
    spec = getattr(early_config.known_args_namespace, "curate_backend", None)
    if spec and not hands_tests_to_workers(early_config.known_args_namespace):
        import_backend(spec)


def hands_tests_to_workers(options: argparse.Namespace) -> bool:
    """Whether this process is pytest-xdist's controller, which runs no test: its workers
    import the backend. Left out there, OpenReg's import was 56 MB of the controller's PSS
    (PyTorch's own test/conftest.py imports torch there all the same). Conservative: only a
    fixed worker count (``-n 2``; ``auto`` is resolved later) without ``--pdb`` (which runs
    the tests here), and never in a process xdist started as a worker."""
    workers = getattr(options, "numprocesses", None)
    return (isinstance(workers, int) and workers > 0 and not getattr(options, "usepdb", False)
            and "PYTEST_XDIST_WORKER" not in os.environ)


_LOADED: dict[str, object] = {}


def import_backend(spec: str) -> object:
    """Import a backend module by dotted name or by path, calling ``:FUNCTION`` once."""
    if spec in _LOADED:
        return _LOADED[spec]
    module_spec, _, function = spec.partition(":")
    module = _import_module(module_spec)
    if function:
        setup = getattr(module, function, None)
        if not callable(setup):
            raise pytest.UsageError(f"--curate-backend: {module_spec} has no function {function!r}")
        setup()
    pin_privateuse1_classes()
    _LOADED[spec] = module
    return module


CDT = "torch.testing._internal.common_device_type"


def pin_privateuse1_classes() -> None:
    """Name every device-generic class of a renamed privateuse1 backend after the backend.

    PyTorch names a class ``TestFoo`` + ``PrivateUse1TestBase.device_type.upper()`` at
    instantiation, and instantiating a test runs the base's ``setUpClass``, which sets that
    attribute to the backend's name on the shared base. So the first class a process
    instantiates is ``TestFooPRIVATEUSE1`` and later ones ``TestBarOPENREG``: which class of
    a file gets which name depends on what the process imported before it (OpenReg). Set
    before any test module imports, the name is the backend's in every process.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return
    name = torch._C._get_privateuse1_backend_name()
    if name in ("privateuseone", "privateuse1"):  # nothing renamed it: no backend of that kind
        return
    imported_before = CDT in sys.modules
    cdt = importlib.import_module(CDT)
    if imported_before and cdt.PrivateUse1TestBase not in cdt.device_type_test_bases and hasattr(torch, name):
        # Imported before the backend existed, its device list left privateuse1 out.
        cdt.device_type_test_bases.append(cdt.PrivateUse1TestBase)
    cdt.PrivateUse1TestBase.device_type = name


def _import_module(spec: str) -> object:
    path = Path(spec)
    if path.suffix == ".py" or path.is_dir() or os.sep in spec:
        if not path.exists():
            raise pytest.UsageError(f"--curate-backend: no such module path: {spec}")
        parent, name = str(path.resolve().parent), path.stem if path.suffix == ".py" else path.name
        if parent not in sys.path:
            sys.path.insert(0, parent)
        spec = name
    try:
        return importlib.import_module(spec)
    except ImportError as exc:
        raise pytest.UsageError(f"--curate-backend: cannot import {spec!r}: {exc}") from exc


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("curate_backend", None) and not hands_tests_to_workers(config.option):
        from testcurator.plugin.backend_guard import guard

        import_backend(config.getoption("curate_backend"))
        guard(config)
    config_path = config.getoption("curate_config", None) or config.getini("curate_config") or None
    if config_path:
        _register_curate(config, Path(config_path))
    for extension in _EXTENSIONS:
        extension.configure(config)


def _register_curate(config: pytest.Config, config_path: Path) -> None:
    from testcurator.config.loader import load_config
    from testcurator.errors import ConfigError
    from testcurator.plugin.curate import CuratePlugin

    if not config_path.is_absolute():
        config_path = config.invocation_params.dir / config_path
    torch_root = config.getoption("curate_torch_root", None)
    if torch_root is None:
        torch_root = Path(os.environ["TORCH_ROOT"]) if os.environ.get("TORCH_ROOT") else config.rootpath
    try:
        loaded = load_config(config_path, torch_root=Path(torch_root).resolve())
    except ConfigError as exc:
        raise pytest.UsageError(f"--curate-config: invalid config:\n{exc}") from exc
    config.pluginmanager.register(CuratePlugin(config, loaded), "testcurator-curate")
