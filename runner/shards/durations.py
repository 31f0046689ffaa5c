"""Per-test durations: a store under the state directory, and pytest-split's file format.

Every run that executes tests (``exec``, the pipeline's draft and verify runs, the CPU op
capture) records each instance's duration here, keyed by node id (relative to the rootdir
pytest ran in, as pytest prints it). The latest measurement wins. Skipped tests and
records without a duration (a process that died before the test reported) are not
recorded: a skip's near-zero time says nothing about what the test costs once it runs.

``.test_durations`` is pytest-split's format: one JSON object mapping node ids to seconds
(older versions wrote a list of ``[nodeid, seconds]`` pairs; both are read). Importing
lets a team bring the timings it already has; exporting feeds ``pytest --splits`` or our
own ``--curate-durations``.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from testcurator.errors import MemoryStoreError
from testcurator.runner.results.records import TestRecord
from testcurator.sharding import file_of, read_test_durations, write_test_durations

DURATIONS_DB = "durations.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS durations (
    nodeid TEXT PRIMARY KEY,
    seconds REAL NOT NULL,
    device TEXT,
    source TEXT NOT NULL,
    runs INTEGER NOT NULL DEFAULT 1,
    updated REAL NOT NULL
);
"""


def recordable(record: TestRecord) -> bool:
    return record.outcome != "skipped" and record.duration > 0 and math.isfinite(record.duration)


class DurationStore:
    """The durations of ``state_dir`` (``durations.sqlite``); created on first write."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / DURATIONS_DB
        self._conn: sqlite3.Connection | None = None

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._conn = sqlite3.connect(self.path, timeout=60)
                self._conn.executescript(_SCHEMA)
            except sqlite3.DatabaseError as exc:
                raise MemoryStoreError(f"{self.path}: not a usable durations store ({exc}); delete it to start over") from exc
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> DurationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def record(self, records: Iterable[TestRecord], source: str) -> int:
        """Store the duration of every record that has one; returns how many."""
        rows = [(r.nodeid, float(r.duration), r.device, source, time.time()) for r in records if recordable(r)]
        return self._upsert(rows)

    def _upsert(self, rows: list[tuple[str, float, str | None, str, float]]) -> int:
        with self.conn:
            self.conn.executemany(
                "INSERT INTO durations (nodeid, seconds, device, source, updated) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(nodeid) DO UPDATE SET seconds=excluded.seconds, device=excluded.device, "
                "source=excluded.source, runs=runs+1, updated=excluded.updated", rows)
        return len(rows)

    def known(self, prefix: str | None = None) -> dict[str, float]:
        """Node id -> seconds (only node ids starting with ``prefix`` when given)."""
        if not self.path.exists():
            return {}
        sql, params = "SELECT nodeid, seconds FROM durations", ()
        if prefix:
            sql, params = sql + " WHERE substr(nodeid, 1, ?) = ?", (len(prefix), prefix)
        return dict(self.conn.execute(sql + " ORDER BY nodeid", params).fetchall())

    def known_for(self, device: str | None) -> dict[str, float]:
        """Node id -> seconds for planning runs on ``device``: per file, its own timings when
        it has any (imported ones count as its own), else those of other devices (a CPU
        capture's timing says more than nothing)."""
        rows = self.rows()
        if device is None:
            return {r["nodeid"]: r["seconds"] for r in rows}
        own = {file_of(r["nodeid"]) for r in rows if r["device"] in (device, None)}
        return {r["nodeid"]: r["seconds"] for r in rows
                if r["device"] in (device, None) or file_of(r["nodeid"]) not in own}

    def rows(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        cur = self.conn.execute("SELECT nodeid, seconds, device, source, runs, updated FROM durations ORDER BY nodeid")
        names = [c[0] for c in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]

    def import_file(self, path: Path) -> int:
        """Merge a pytest-split ``.test_durations`` file into the store; returns how many."""
        durations = read_test_durations(path)
        now = time.time()
        return self._upsert([(n, s, None, "import", now) for n, s in durations.items() if s > 0])

    def export_file(self, path: Path, prefix: str | None = None) -> int:
        durations = self.known(prefix)
        write_test_durations(path, durations)
        return len(durations)
