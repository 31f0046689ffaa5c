"""The run directory: every stage's outputs as JSON files, written atomically.

A node that finds its output already written (a resumed run) reuses it, which is what
makes the nodes idempotent: a run killed mid-stage redoes only the unfinished work.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from testcurator.agents.decision import Decision, FileDecision, from_dict, to_dict
from testcurator.files import atomic_write_text

_TIMINGS_LOCK = threading.Lock()  # fan-out nodes may finish on several threads


def file_key(rel_path: str) -> str:
    """A flat, readable file name for an upstream path (``test/test_ops.py`` -> ``test__test_ops``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", rel_path.removesuffix(".py").replace("/", "__"))


class RunStore:
    """One run's outputs under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    def write_json(self, rel: str, data: Any) -> Path:
        path = self.path(rel)
        atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
        return path

    def read_json(self, rel: str, default: Any = None) -> Any:
        path = self.path(rel)
        if not path.exists():
            return default
        return json.loads(path.read_text(encoding="utf-8"))

    def has(self, rel: str) -> bool:
        return self.path(rel).exists()

    # --- decisions ------------------------------------------------------------------
    def write_decisions(self, stage: str, rel_path: str, decisions: Iterable[Decision]) -> None:
        self.write_json(f"{stage}/{file_key(rel_path)}.json",
                        {"file": rel_path, "decisions": [to_dict(d) for d in decisions]})

    def read_decisions(self, stage: str, rel_path: str) -> list[Decision] | None:
        data = self.read_json(f"{stage}/{file_key(rel_path)}.json")
        if data is None:
            return None
        return [from_dict(Decision, d) for d in data["decisions"]]

    def write_scope(self, decisions: Iterable[FileDecision]) -> None:
        self.write_json("scope.json", [to_dict(d) for d in decisions])

    def read_scope(self) -> list[FileDecision] | None:
        data = self.read_json("scope.json")
        return None if data is None else [from_dict(FileDecision, d) for d in data]

    # --- timings and usage ----------------------------------------------------------
    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        with _TIMINGS_LOCK:
            timings = self.read_json("timings.json", {})
            timings[stage] = round(timings.get(stage, 0.0) + time.perf_counter() - start, 3)
            self.write_json("timings.json", timings)
