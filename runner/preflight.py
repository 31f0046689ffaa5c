"""Checks made before any test runs: does the backend module import where pytest will run?

A backend module that does not import (a typo in the profile's ``backend_module``, a
missing ``python_path``) would otherwise surface as pytest usage errors deep inside a
pipeline, after minutes of indexing. It is imported here the way the plugin will import
it (``--curate-backend``: dotted name, path, ``MODULE:FUNCTION``), in a child process with
the run's interpreter, environment and working directory, so the check neither registers a
device in the caller nor misses a ``PYTHONPATH`` the profile adds.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from testcurator.errors import BadInputError

_IMPORT = ("import sys\n"
           "sys.path.insert(0, '')\n"
           "from testcurator.plugin.entry import import_backend\n"
           "import_backend(sys.argv[1])\n")
_CHECKED: set[tuple[str, str, tuple[tuple[str, str], ...]]] = set()


def check_backend(module: str, *, env: Mapping[str, str], cwd: Path, where: str, timeout_s: float = 600.0) -> None:
    """Raise BadInputError naming ``where`` (the profile field or option) when ``module``
    does not import; each (module, cwd, environment) is checked once per process."""
    key = (module, str(cwd), tuple(sorted(env.items())))
    if key in _CHECKED:
        return
    try:
        proc = subprocess.run([sys.executable, "-c", _IMPORT, module], cwd=cwd, env=dict(env), capture_output=True,
                              text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise BadInputError(f"{where}: importing backend module {module!r} took over {timeout_s:.0f}s") from exc
    if proc.returncode != 0:
        lines = [line for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
        raise BadInputError(f"{where}: backend module {module!r} does not import: {lines[-1] if lines else proc.returncode}")
    _CHECKED.add(key)
