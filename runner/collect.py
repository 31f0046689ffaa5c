"""Collect upstream tests in a subprocess and name every instance in generic terms.

Importers and exporters need the real instantiated tests (``TestFooCPU::test_bar_cpu_float32``)
to say what a name or a pattern stands for. Collection runs in a child ``pytest
--collect-only`` with this module loaded as a plugin (``-p testcurator.runner.collect``),
never in-process: upstream test modules mutate global state at import, and a broken file
must not take the caller down. The plugin writes one JSON record per item.

Each record also carries the item's keywords, the names ``pytest -k`` matches against
(every node name in the item's chain but the session's, plus marker names), so a
substring pattern is matched the way pytest applies it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from testcurator.errors import BadInputError, ExecutionError

OUT_OPTION = "--curate-collect-out"
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
        return f"{self.cls}::{self.name}" if self.cls else self.name


# --- the plugin side (runs inside the child pytest) -------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(OUT_OPTION, dest="curate_collect_out", default=None, help="write collected items as JSON lines")


def pytest_collection_finish(session: pytest.Session) -> None:
    out = session.config.getoption("curate_collect_out")
    if not out:
        return
    records = [_record(item) for item in session.items]
    Path(out).write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records), encoding="utf-8")


def _record(item: pytest.Item) -> dict[str, Any]:
    from testcurator.plugin.curate import item_identity

    ident = item_identity(item)
    cls = getattr(item, "cls", None)
    keywords = {node.name for node in item.listchain() if not isinstance(node, pytest.Session)}
    keywords.update(mark.name for node in item.listchain() for mark in node.own_markers)
    return {
        "nodeid": item.nodeid,
        "file": os.path.realpath(str(item.path)),
        "cls": cls.__name__ if cls is not None else "",
        "name": item.name,
        "generic": ident.generic,
        "device": ident.device,
        "dtype": ident.dtype,
        "op": ident.op_formatted,
        "module": ident.module,
        "keywords": sorted(keywords),
    }


# --- the caller side -------------------------------------------------------------------
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
        cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
               "-p", "no:testcurator", "-p", "testcurator.runner.collect", f"{OUT_OPTION}={out}",
               *[str(Path(f).resolve()) for f in sorted(files)]]
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
