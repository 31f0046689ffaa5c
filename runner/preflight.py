"""Checks made before any test runs: does the backend module import where pytest will run,
and does pytest start at all in the upstream tree (its own ``pytest.ini`` and ``conftest.py``)?

A backend module that does not import (a typo in the profile's ``backend_module``, a
missing ``python_path``) would otherwise surface as pytest usage errors deep inside a
pipeline, after minutes of indexing. It is imported here the way the plugin will import
it (``--curate-backend``: dotted name, path, ``MODULE:FUNCTION``), in a child process with
the run's interpreter, environment and working directory, so the check neither registers a
device in the caller nor misses a ``PYTHONPATH`` the profile adds. A tree whose harness
breaks pytest (:func:`check_harness`) is bad input in the same way, named by file and line.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from testcurator.errors import BadInputError
from testcurator.runner.command import INI_NAMES, pytest_argv, run_logged, tree_options
from testcurator.runner.pytest_fault import pytest_fault
from testcurator.runner.reconcile import PYTEST_FINISHED

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


_HARNESS_FILES = ("conftest.py", "test/conftest.py")


def check_harness(root: Path, *, env: Mapping[str, str], log: Path, timeout_s: float = 600.0) -> None:
    """Raise BadInputError when pytest cannot start in the upstream tree ``root``: its own
    ``pytest.ini`` (addopts, ini syntax) or ``conftest.py`` (an import error, a hook that
    breaks, a plugin it registers) stops every pytest the run would start.

    One collect-only that loads the tree's config and its top conftests and collects no test
    (every ``.py`` ignored, no folder entered), so it costs a pytest start, not an import of
    the tests. The error names the file and line that failed (runner/pytest_fault.py); the
    whole output stays in ``log``. A tree with neither a pytest config nor a conftest has
    nothing to check."""
    root = root.resolve()
    if not any((root / name).is_file() for name in (*INI_NAMES, *_HARNESS_FILES)):
        return
    target = root / "test" if (root / "test").is_dir() else root
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = pytest_argv("--collect-only", "-q", "--ignore-glob=*.py", "-o", "norecursedirs=*",
                       *tree_options(root, log.parent), str(target))
    try:
        returncode = run_logged(argv, cwd=root, env=env, log=log, timeout_s=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise BadInputError(f"{root}: pytest did not start in the tree within {timeout_s:.0f}s "
                            f"(its conftest.py?); see {log}") from exc
    if returncode in PYTEST_FINISHED:
        return
    text = log.read_text(encoding="utf-8", errors="replace")
    problem = pytest_fault(text, root)
    what = str(problem) if problem is not None else f"pytest exit {returncode}"
    raise BadInputError(f"{what}\n  pytest breaks in the upstream tree {root} before any test runs: its own "
                        f"pytest.ini or conftest.py (or what they load) fails (pytest exit {returncode}); full log: {log}")
