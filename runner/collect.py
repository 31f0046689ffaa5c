"""Collect upstream tests in a subprocess and name every instance in generic terms.

Importers and exporters need the real instantiated tests (``TestFooCPU::test_bar_cpu_float32``)
to say what a name or a pattern stands for. Collection runs in a child ``pytest
--collect-only`` with the collection plugin loaded (``-p testcurator.plugin.collect``),
never in-process: upstream test modules mutate global state at import, and a broken file
must not take the caller down. The plugin writes one JSON record per item (with its
keywords, so a substring pattern is matched the way ``pytest -k`` applies it).

Collection goes on past a file that does not import (``--continue-on-collection-errors``):
:func:`collect_files` returns those as :class:`CollectError` records beside what did
collect (an upstream checkout that does not match the installed torch always has some);
:func:`collect` is the strict form, for callers that need every file.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from testcurator.errors import BadInputError, ExecutionError
from testcurator.plugin.collect import OUT_OPTION
from testcurator.runner.command import pytest_argv
from testcurator.vocab import join_name

COLLECT_TIMEOUT_S = 900
_HEAD_LINES = 12


@dataclass(frozen=True)
class CollectError:
    """A file (or folder) that did not collect, with pytest's whole report."""

    nodeid: str
    file: str  # real path
    text: str

    @property
    def summary(self) -> str:
        """The error itself: pytest's ``E`` lines (the exception), else the report's first line."""
        lines = [line for line in self.text.splitlines() if line.strip()]
        raised = [line[1:].strip() for line in lines if line.startswith("E ")]
        return " ".join(raised[:3]) or (lines[0].strip() if lines else "collection failed (no report)")

    @property
    def head(self) -> str:
        """The start of the report (where pytest says what failed), a dozen lines."""
        return "\n".join(self.text.strip().splitlines()[:_HEAD_LINES])


@dataclass(frozen=True)
class Collection:
    """What collected, and what did not."""

    tests: list[CollectedTest]
    errors: list[CollectError]


@dataclass(frozen=True)
class CollectedTest:
    """One collected item: where it is, its instantiated and its generic name."""

    nodeid: str
    file: str  # real path of the test file
    cls: str  # instantiated class name ("" for module-level functions)
    name: str  # attribute / function name as collected (``test_bar_cpu_float32``)
    generic: str  # ``Class::test``
    device: str | None
    dtype: str | None
    op: str | None  # formatted as in test names (``nn_functional_relu``)
    module: str | None
    keywords: tuple[str, ...]

    @property
    def instance(self) -> str:
        """``TestFooCPU::test_bar_cpu_float32`` (the class-qualified instantiated name)."""
        return join_name(self.cls, self.name)


def collect(files: Sequence[Path], *, rootdir: Path, env: dict[str, str] | None = None,
            timeout_s: float = COLLECT_TIMEOUT_S) -> list[CollectedTest]:
    """Collect ``files`` (run from ``rootdir``); items sorted by node id. Any file that does
    not collect is an :class:`ExecutionError` naming each, with the start of its error."""
    result = collect_files(files, rootdir=rootdir, env=env, timeout_s=timeout_s)
    if result.errors:
        raise ExecutionError(f"{len(result.errors)} upstream file(s) did not collect in {rootdir}:\n"
                             + "\n".join(f"{e.nodeid}: {e.summary}" for e in result.errors))
    return result.tests


def collect_files(files: Sequence[Path], *, rootdir: Path, env: dict[str, str] | None = None,
                  timeout_s: float = COLLECT_TIMEOUT_S) -> Collection:
    """Collect ``files`` (run from ``rootdir``), going on past files that do not collect."""
    missing = [str(f) for f in files if not Path(f).is_file()]
    if missing:
        raise BadInputError(f"upstream test file(s) do not exist: {', '.join(sorted(missing))}")
    if not files:
        return Collection([], [])
    with tempfile.TemporaryDirectory(prefix="curate-collect-") as tmp:
        out = Path(tmp) / "items.jsonl"
        # The user's plugins stay on: they add markers, and so keywords ``-k`` patterns match.
        cmd = pytest_argv("--collect-only", "-q", "--continue-on-collection-errors", "-p", "no:testcurator",
                          "-p", "testcurator.plugin.collect", f"{OUT_OPTION}={out}",
                          *[str(Path(f).resolve()) for f in sorted(files)], unrelated_off=False)
        child_env = {**os.environ, **(env or {})}
        try:
            proc = subprocess.run(cmd, cwd=rootdir, env=child_env, capture_output=True, text=True,
                                  timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            raise ExecutionError(f"collecting {len(files)} file(s) took over {timeout_s:.0f}s") from exc
        # 0: collected; 1: some files did not (recorded); 5: nothing collected. Anything else,
        # or no records at all, is pytest itself failing: its output says why, from the top.
        if proc.returncode not in (0, 1, 5) or not out.exists():
            lines = (proc.stdout + proc.stderr).strip().splitlines()
            shown = lines[:20] + (["..."] + lines[-10:] if len(lines) > 30 else lines[20:])
            raise ExecutionError(f"pytest --collect-only failed (exit {proc.returncode}) in {rootdir}:\n" + "\n".join(shown))
        records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]
    tests = [CollectedTest(**{**r, "keywords": tuple(r["keywords"])}) for r in records if "error" not in r]
    errors = [CollectError(r["error"], r["file"], r["text"]) for r in records if "error" in r]
    return Collection(sorted(tests, key=lambda t: t.nodeid), sorted(errors, key=lambda e: e.nodeid))
