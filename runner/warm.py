"""A pytest started before its command line is known, so its imports overlap other work.

Every pytest testcurator starts pays a fixed import of Python, pytest, torch and PyTorch's
test machinery (``common_device_type``, ``op_db``): about 4 s on the machine we measure
on, a third of ``testcurator upgrade``'s delta run on a 300-file tree
(``bench/upgrade.py``). An upgrade knows the tree and environment of its delta capture
from the start, but its arguments (the delta's tests, the run's folders) only after it has
compared the trees; :class:`WarmPytest` starts the interpreter at once, which imports
``preload`` and then waits on its stdin for the arguments.

What it runs is the same pytest: the same interpreter, working directory and environment
(:meth:`WarmPytest.fits` refuses any other), the arguments ``python -m pytest`` would get
(:meth:`WarmPytest.run` takes that very argv), its output to the same log, its exit code
returned. Only the order differs: modules a test file would import come first. PyTorch's
test modules read the command line when a test calls ``run_tests``, not at import, so
importing them earlier changes nothing a pytest run sees. An interpreter is used once;
one never used is killed when its owner closes it (or ends as its stdin closes when its
owner dies).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from testcurator.runner.command import PYTHON_M_PYTEST

# PyTorch's shared test machinery: what upstream test files import before their tests.
_TEST_MODULE = re.compile(r"^\s*(?:from|import)\s+(torch\.testing\._internal\.[A-Za-z_][\w.]*)", re.MULTILINE)


def torch_test_modules(sources: Iterable[Path]) -> list[str]:
    """The ``torch.testing._internal`` modules ``sources`` import, sorted (unreadable files skipped)."""
    found: set[str] = set()
    for path in sources:
        try:
            found.update(_TEST_MODULE.findall(path.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    return sorted(found)


class WarmPytest:
    """One ``python -m pytest`` whose interpreter starts now and whose arguments come later."""

    def __init__(self, cwd: Path, env: Mapping[str, str], preload: Sequence[str] = ()) -> None:
        self.cwd, self.env = cwd.resolve(), dict(env)
        self._used = False
        self._proc = subprocess.Popen([sys.executable, "-m", "testcurator.runner.warm", "torch", *preload],
                                      cwd=self.cwd, env=self.env, stdin=subprocess.PIPE,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)

    def fits(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> bool:
        """Whether :meth:`run` would run ``argv`` exactly as a new process would."""
        return (not self._used and self._proc.poll() is None and tuple(argv[:len(PYTHON_M_PYTEST)]) == PYTHON_M_PYTEST
                and cwd.resolve() == self.cwd and dict(env) == self.env)

    def run(self, argv: Sequence[str], log: Path) -> int:
        """Run ``argv`` (a ``python -m pytest`` command line that :meth:`fits`) with its output
        in ``log``; pytest's exit code."""
        assert self._proc.stdin is not None
        self._used = True
        try:
            args = list(argv[len(PYTHON_M_PYTEST):])
            self._proc.stdin.write(json.dumps({"args": args, "log": str(log.resolve())}) + "\n")
            self._proc.stdin.close()
        except BrokenPipeError:  # the interpreter died while importing: its exit code says how
            pass
        return self._proc.wait()

    def close(self) -> None:
        """End an interpreter nobody used: it has run nothing, so it is killed, mid-import or waiting."""
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            self._proc.stdin.close()

    def __enter__(self) -> WarmPytest:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _serve(preload: Sequence[str]) -> int:
    """The interpreter's side: import ``preload``, wait for the arguments, run pytest."""
    for name in preload:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the test file that imports it reports the error, as it would
            pass
    line = sys.stdin.readline()
    if not line:
        return 0  # closed unused
    request = json.loads(line)
    # pytest's output goes where a new process's would (run_logged: stdout and stderr to the log).
    fd = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    import pytest

    sys.argv = [pytest.__file__, *request["args"]]
    return int(pytest.main(request["args"]))


if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1:]))
