"""Digests that say what a run ran: the backend, and a folder of configs.

A change of outcome between two runs has a cause only if some input changed: the backend
(:func:`backend_digest`), torch, the upstream tree, or the test's own source. With none
changed, the test is flaky. The backend digest therefore covers everything that changes what
the backend does: the profile, the backend's source files (``source_paths``), the files of
the installed backend module (a rebuilt extension changes them), and the environment
variables the profile names in ``digest_env`` (an op allowlist such as
``CURATEDEV_ALLOWED_OPS``), which the test processes inherit.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from testcurator.config.profile import BackendProfile

_SOURCE_SUFFIXES = (".py", ".cpp", ".cc", ".cu", ".h", ".hpp", ".c", ".yaml", ".toml")
_MODULE_SUFFIXES = (".py", ".so", ".pyd", ".dylib", ".dll")
_MODULE_BYTES = 512 * 1024 * 1024  # a backend package larger than this is digested by size and mtime


def _files(roots: Iterable[Path], suffixes: tuple[str, ...]) -> list[Path]:
    files: set[Path] = set()
    for root in roots:
        if root.is_file():
            files.add(root)
        elif root.is_dir():
            files.update(p for p in root.rglob("*") if p.is_file() and p.suffix in suffixes
                         and "__pycache__" not in p.parts)
    return sorted(files)


def module_files(profile: BackendProfile, profile_path: Path) -> list[Path]:
    """The installed files of the profile's backend module (its top-level package), found
    without importing it, on the profile's ``python_path`` first, then wherever the
    interpreter's finders map it: an editable install (``pip install -e``, as OpenReg's
    build.sh installs it) is found by a finder of its own, not on ``sys.path``, and without
    it a backend that lost a kernel since the last night looked unchanged."""
    if not profile.backend_module:
        return []
    top = profile.backend_module.split(":", 1)[0].split(".", 1)[0]
    paths = [str((profile_path.parent / p).resolve()) for p in profile.python_path]
    spec = importlib.machinery.PathFinder.find_spec(top, paths + [p for p in sys.path if p])
    if spec is None:
        try:
            spec = importlib.util.find_spec(top)  # sys.meta_path's finders; a top-level name imports nothing
        except (ImportError, ValueError):
            spec = None
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return _files((Path(p) for p in spec.submodule_search_locations), _MODULE_SUFFIXES)
    return [Path(spec.origin)] if spec.origin and Path(spec.origin).is_file() else []


def _update(digest: Any, files: Sequence[Path]) -> None:
    total = sum(p.stat().st_size for p in files)
    for path in files:
        digest.update(path.name.encode() + b"\0")
        if total <= _MODULE_BYTES:
            digest.update(path.read_bytes())
        else:
            stat = path.stat()
            digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())


def backend_digest(profile: BackendProfile, profile_path: Path, sources: Sequence[Path],
                   environ: Mapping[str, str] | None = None) -> str:
    """16 hex digits over the profile, the backend's sources and installed module, and the
    environment that changes its behaviour (see the module docstring)."""
    digest = hashlib.sha256(profile_path.read_bytes())
    _update(digest, _files(sources, _SOURCE_SUFFIXES))
    _update(digest, module_files(profile, profile_path))
    env = profile.behaviour_env(os.environ if environ is None else environ)
    digest.update(json.dumps(env, sort_keys=True).encode())
    return digest.hexdigest()[:16]


def config_digest(configs: Path) -> str:
    """16 hex digits over a config file or folder (its YAML files, by relative path and
    content); ``""`` when there is none."""
    files = [configs] if configs.is_file() else sorted(configs.rglob("*.yaml")) if configs.is_dir() else []
    if not files:
        return ""
    digest = hashlib.sha256()
    for path in files:
        rel = path.name if configs.is_file() else path.relative_to(configs).as_posix()
        digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]
