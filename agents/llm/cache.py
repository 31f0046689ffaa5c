"""What the LLM client keeps on disk: validated answers (a cache) and unusable ones (an audit log).

The cache holds validated answers by key in SQLite, so a rerun over unchanged input makes no
call. The audit log is the only place a model's raw text is written when it was not used: an
answer that did not parse or match the schema, one the rails rejected, a request format the
server refused. Reasons in configs and reports name the failed field or rule in one line and
point here (issue 9: the raw text never enters ``configs/``).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

RAW_LIMIT = 20_000  # characters of raw text kept per audit record


def digest(*parts: Any) -> str:
    """sha256 over a JSON rendering of ``parts`` (stable across runs and processes)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def schema_hash(model: type[BaseModel]) -> str:
    return digest(model.model_json_schema())


class AnswerCache:
    """Validated answers by key, in SQLite (one row per key; last write wins).

    A connection per operation: brains may be driven from worker threads.
    ``path=None`` keeps answers in memory for this process only.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._memory: dict[str, str] = {}
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)")

    def _connect(self) -> sqlite3.Connection:
        assert self.path is not None
        return sqlite3.connect(self.path, timeout=30)

    def get(self, key: str) -> str | None:
        if self.path is None:
            return self._memory.get(key)
        with self._lock, self._connect() as conn:
            row = conn.execute("SELECT value FROM answers WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def put(self, key: str, value: str) -> None:
        if self.path is None:
            self._memory[key] = value
            return
        with self._lock, self._connect() as conn:
            conn.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?)", (key, value, time.time()))


class AuditLog:
    """Append-only JSON lines: one record per unusable answer, with the model's raw text.

    ``path=None`` keeps records in memory (``records``) only.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.records: list[dict[str, Any]] = []
        self.written = 0
        self._lock = threading.Lock()

    def write(self, *, kind: str, raw: str | None, **fields: Any) -> None:
        record = {"time": round(time.time(), 3), "kind": kind, **fields,
                  "raw": None if raw is None else raw[:RAW_LIMIT]}
        with self._lock:
            self.written += 1
            if self.path is None:
                self.records.append(record)
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(record, sort_keys=True) + "\n")

    def read(self) -> list[dict[str, Any]]:
        """Every record (from the file when there is one)."""
        if self.path is None:
            return list(self.records)
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()]
