"""Build the curatedev C++ extension once and load it from a cache afterwards.

The build directory is keyed by a hash of the sources, the torch version and the
Python version, so a changed source or a new torch gets a fresh build while every
later import loads the finished library directly (no ninja, no compiler).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import time
from pathlib import Path
from types import ModuleType

import torch

EXTENSION_NAME = "curatedev_C"
BUILD_DIR_ENV = "TESTCURATOR_BACKEND_BUILD_DIR"
CSRC = Path(__file__).resolve().parent / "csrc"
# Written only after a build finished: the fast path trusts nothing else, so a
# build killed half-way (or one still running in another xdist worker) is
# never loaded.
STAMP = "BUILD_OK"


class CuratedevBuildError(RuntimeError):
    """The extension could not be built or loaded; carries the build directory."""

    def __init__(self, message: str, build_dir: Path) -> None:
        super().__init__(f"{message} (build directory: {build_dir})")
        self.build_dir = build_dir


def sources() -> list[Path]:
    return sorted(CSRC.glob("*.cpp"))


def source_hash() -> str:
    digest = hashlib.sha256()
    for path in sources():
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    digest.update(torch.__version__.encode())
    digest.update(sys.version.split()[0].encode())
    return digest.hexdigest()[:16]


def build_dir() -> Path:
    """`$TESTCURATOR_BACKEND_BUILD_DIR`, else ~/.cache/testcurator/curatedev-<hash>."""
    explicit = os.environ.get(BUILD_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser() / f"curatedev-{source_hash()}"
    return Path.home() / ".cache" / "testcurator" / f"curatedev-{source_hash()}"


def _library_path(directory: Path) -> Path | None:
    matches = sorted(directory.glob(f"{EXTENSION_NAME}*.so"))
    return matches[0] if matches else None


def _import_library(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(EXTENSION_NAME, path)
    if spec is None or spec.loader is None:
        raise CuratedevBuildError(f"cannot import {path}", path.parent)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[EXTENSION_NAME] = module
    return module


def load_extension(verbose: bool = False) -> tuple[ModuleType, float, bool]:
    """Return (module, seconds spent, whether it was compiled now)."""
    if EXTENSION_NAME in sys.modules:
        return sys.modules[EXTENSION_NAME], 0.0, False
    start = time.perf_counter()
    directory = build_dir()
    library = _library_path(directory)
    if library is not None and (directory / STAMP).is_file():
        return _import_library(library), time.perf_counter() - start, False
    directory.mkdir(parents=True, exist_ok=True)
    # Deferred: cpp_extension imports setuptools, costly on the cached path.
    from torch.utils.cpp_extension import load

    try:
        # load() takes a file lock in the build directory, so concurrent
        # first imports (xdist workers) build once and the others wait.
        module = load(
            name=EXTENSION_NAME,
            sources=[str(p) for p in sources()],
            build_directory=str(directory),
            extra_cflags=["-O2"],
            verbose=verbose,
        )
    except (RuntimeError, OSError) as exc:
        raise CuratedevBuildError(f"building {EXTENSION_NAME} failed: {exc}", directory) from exc
    tmp = directory / f"{STAMP}.{os.getpid()}.tmp"
    tmp.write_text(f"{torch.__version__}\n", encoding="utf-8")
    os.replace(tmp, directory / STAMP)
    return module, time.perf_counter() - start, True
