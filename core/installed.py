"""The torch this process would import, read from its installed files without importing it.

The run's driver parses test names (which needs every dtype's name), keys its caches and its
night's identity by torch's version and writes torch's build into each run's manifest, but
runs no torch code: importing torch for those facts cost it about a second and 250 MB of
memory for the whole run. Processes that have imported torch get the same answers
(tests/core/test_installed.py compares them).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from functools import lru_cache
from pathlib import Path

# ``torch.float`` & co. name the same dtypes as ``torch.float32`` & co. (``str(torch.float)``
# is ``torch.float32``): test names spell the canonical names only.
DTYPE_ALIASES = frozenset({"float", "double", "half", "short", "int", "long", "chalf", "cfloat", "cdouble"})
# How torch's type stub (torch/_C/__init__.pyi) declares each dtype: ``float32: dtype = ...``.
_STUB_DTYPE = re.compile(r"^([a-z][a-z0-9_]*): dtype = \.\.\.$", re.MULTILINE)
# The sub-byte dtypes torch defines in C++ (``torch.uint1`` to ``torch.uint7``, ``torch.int1``
# to ``torch.int7``, since 2.3) and its stub does not declare.
SUB_BYTE_DTYPES = frozenset(f"{sign}int{bits}" for sign in ("", "u") for bits in range(1, 8))


def torch_dir() -> Path | None:
    """The folder of the torch package this process would import (None: no torch)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def version_fields() -> dict[str, str | None]:
    """``__version__``, ``git_version`` and ``cuda`` as torch/version.py (written by torch's
    build, and what ``torch.__version__`` is read from) sets them; None where it does not, and
    the first two alone where there is no torch."""
    folder = torch_dir()
    if folder is None:
        return {"version": None, "git_version": None}
    version_file = folder / "version.py"
    text = version_file.read_text(encoding="utf-8") if version_file.exists() else ""

    def field(name: str) -> str | None:
        match = re.search(rf"^{name}\s*(?::\s*[^=]+)?=\s*['\"]([^'\"]*)['\"]", text, re.M)
        return match.group(1) if match else None

    return {"version": field("__version__"), "git_version": field("git_version"), "cuda": field("cuda")}


@lru_cache(maxsize=1)  # each capture file's cache key asks: one read per process
def torch_version() -> str:
    """``torch.__version__`` (``2.13.0+cpu``), read from torch/version.py; from torch itself
    where that file says nothing."""
    version = version_fields()["version"]
    if version is not None:
        return version
    import torch

    return str(torch.__version__)


@lru_cache(maxsize=1)
def dtype_names() -> frozenset[str]:
    """Every dtype name as PyTorch spells it in test names (``float32``, ``bool``...): from
    torch's type stub, or from torch where it is already imported or has no stub."""
    if "torch" not in sys.modules:
        names = stub_dtype_names()
        if names:
            return names
    return imported_dtype_names()


def stub_dtype_names() -> frozenset[str]:
    """The dtypes torch's type stub declares, less the aliases, with the sub-byte ones; empty
    when there is no stub or it declares none."""
    folder = torch_dir()
    if folder is None:
        return frozenset()
    stub = folder / "_C" / "__init__.pyi"
    try:
        text = stub.read_text(encoding="utf-8")
    except OSError:
        return frozenset()
    declared = frozenset(_STUB_DTYPE.findall(text))
    return declared - DTYPE_ALIASES | SUB_BYTE_DTYPES if declared else frozenset()


def imported_dtype_names() -> frozenset[str]:
    """The dtypes torch defines, read from torch itself (imports it)."""
    import torch

    return frozenset(str(v).split(".", 1)[1] for v in vars(torch).values() if isinstance(v, torch.dtype))
