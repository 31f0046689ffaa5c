"""Collect upstream tests in a subprocess and name every instance in generic terms.

Importers and exporters need the real instantiated tests (``TestFooCPU::test_bar_cpu_float32``)
to say what a name or a pattern stands for. Collection runs in a child ``pytest
--collect-only`` with the collection plugin loaded (``-p testcurator.plugin.collect``),
never in-process: upstream test modules mutate global state at import, and a broken file
must not take the caller down. The plugin writes one JSON record per item (with its
keywords, so a substring pattern is matched the way ``pytest -k`` applies it).
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
    """Collect ``files`` (run from ``rootdir``); items sorted by node id."""
    missing = [str(f) for f in files if not Path(f).is_file()]
    if missing:
        raise BadInputError(f"upstream test file(s) do not exist: {', '.join(sorted(missing))}")
    if not files:
        return []
    with tempfile.TemporaryDirectory(prefix="curate-collect-") as tmp:
        out = Path(tmp) / "items.jsonl"
        # The user's plugins stay on: they add markers, and so keywords ``-k`` patterns match.
        cmd = pytest_argv("--collect-only", "-q", "-p", "no:testcurator", "-p", "testcurator.plugin.collect",
                          f"{OUT_OPTION}={out}", *[str(Path(f).resolve()) for f in sorted(files)], unrelated_off=False)
        child_env = {**os.environ, **(env or {})}
        try:
            proc = subprocess.run(cmd, cwd=rootdir, env=child_env, capture_output=True, text=True,
                                  timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            raise ExecutionError(f"collecting {len(files)} file(s) took over {timeout_s:.0f}s") from exc
        # 0: collected; 5: nothing collected. Anything else is an error in the upstream tree.
        if proc.returncode not in (0, 5) or not out.exists():
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-30:]
            raise ExecutionError(f"pytest --collect-only failed (exit {proc.returncode}) in {rootdir}:\n" + "\n".join(tail))
        records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]
    tests = [CollectedTest(**{**r, "keywords": tuple(r["keywords"])}) for r in records]
    return sorted(tests, key=lambda t: t.nodeid)
