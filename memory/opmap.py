"""The test-to-op map: which aten ops each instantiated test dispatches.

Three sources feed it, kept side by side per node id:
- ``captured``: the pytest plugin ran the test under a TorchDispatchMode and recorded the
  aten overloads it dispatched (``aten::add.Tensor``), see ``testcurator.plugin.capture``;
- ``compile``: for a test that called ``torch.compile``, the aten ops of the graphs it
  compiled (forward and backward, after AOTAutograd), see ``testcurator.plugin.compile_capture``;
- ``static``: at collection, before any execution, an ``@ops`` test's OpInfo names its op
  and the aten op behind it (``add`` -> ``aten::add``).

Capture files are JSON lines (one :class:`~testcurator.plugin.oprecord.OpRecord` per line). Under pytest-xdist each
worker writes its own part ``FILE.gw0``, ``FILE.gw1``...; :meth:`OpMap.ingest` given
``FILE`` reads it and every part beside it. Re-ingesting replaces the records of the same
node id and source, so ingesting twice changes nothing.

This module needs no torch: queries stay fast from the CLI.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from testcurator.errors import BadInputError, MemoryStoreError, MissingPathError
from testcurator.names import split_dtypes
from testcurator.plugin.oprecord import SOURCES, OpRecord, capture_parts, read_records
from testcurator.vocab import TestKey, normalize_op, op_base

SCHEMA_VERSION = 3
OPS_DB = "ops.sqlite"

# Secondary indexes (name -> table and columns): a large ingest drops and rebuilds them
# (OpMap._store), so they are spelled once, here.
_INDEXES = {
    "record_ops_base": "record_ops (aten_base)", "record_ops_aten": "record_ops (aten)",
    "records_generic": "records (generic)", "records_op": "records (op)",
    "record_calls_call": "record_calls (call)",
}


def _create_indexes(*names: str) -> str:
    return "".join(f"CREATE INDEX IF NOT EXISTS {name} ON {_INDEXES[name]};\n" for name in names)


# Idempotent and one transaction: two processes creating the same fresh file both succeed,
# and a crash never leaves tables without a version row.
_SCHEMA = f"""
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY, node_id TEXT NOT NULL, source TEXT NOT NULL,
    generic TEXT NOT NULL, device TEXT, dtype TEXT, op TEXT, module TEXT,
    outcome TEXT, error TEXT, UNIQUE (node_id, source));
CREATE TABLE IF NOT EXISTS record_ops (
    record_id INTEGER NOT NULL, aten TEXT NOT NULL, aten_base TEXT NOT NULL,
    PRIMARY KEY (record_id, aten));
{_create_indexes("record_ops_base", "record_ops_aten", "records_generic", "records_op")}
{{calls}}
INSERT INTO schema_version SELECT {SCHEMA_VERSION} WHERE NOT EXISTS (SELECT 1 FROM schema_version);
COMMIT;
"""
# Version 2 adds the distinct calls (op + input dtypes) per record and one replayable example
# per call (the capability probe's input); a version-1 map gains the tables in place.
_CALLS = f"""
CREATE TABLE IF NOT EXISTS record_calls (
    record_id INTEGER NOT NULL, call TEXT NOT NULL, PRIMARY KEY (record_id, call));
{_create_indexes("record_calls_call")}
CREATE TABLE IF NOT EXISTS call_examples (call TEXT PRIMARY KEY, example TEXT NOT NULL);
"""
# Version 3 adds the calls a record made only to see them raise (OpRecord.raised).
_RAISED = """
CREATE TABLE IF NOT EXISTS record_raised (
    record_id INTEGER NOT NULL, call TEXT NOT NULL, PRIMARY KEY (record_id, call));
"""
_SCHEMA = _SCHEMA.replace("{calls}", _CALLS + _RAISED)
# A batch at least this large (and a quarter of the map) is ingested with the secondary
# indexes dropped and rebuilt: sorting once beats updating them row by row (2.4x at 200,000
# records, bench/scale.py). A delta's few records update them in place.
BULK_RECORDS = 5000
# A map of an older version gains the tables in place (its records made no calls, or raised none).
_MIGRATE = {1: f"BEGIN IMMEDIATE;{_CALLS}{_RAISED}UPDATE schema_version SET version = {SCHEMA_VERSION};COMMIT;",
            2: f"BEGIN IMMEDIATE;{_RAISED}UPDATE schema_version SET version = {SCHEMA_VERSION};COMMIT;"}


def normalize_dtype(dtype: str) -> str:
    return dtype.strip().removeprefix("torch.")


@dataclass(frozen=True)
class OpHit:
    """One instantiated test that uses the op asked for."""

    generic: str
    nodeid: str
    device: str | None
    dtype: str | None
    source: str
    op: str | None
    aten: tuple[str, ...] = field(default_factory=tuple)  # the matching overloads


@dataclass(frozen=True)
class OpUse:
    """One aten op a generic test uses, over all its instances."""

    aten: str
    sources: tuple[str, ...]
    instances: int


@dataclass(frozen=True)
class InstanceCalls:
    """One captured instance and the distinct calls (op + input dtypes) it made; ``device``
    is None for a test that is not device-generic (it runs on CPU whatever the backend)."""

    nodeid: str
    generic: str
    device: str | None
    dtype: str | None
    op: str | None
    module: str | None
    calls: tuple[str, ...]
    raised: tuple[str, ...] = ()  # of ``calls``, those it made only to see them raise


@dataclass(frozen=True)
class IngestStats:
    files: int
    records: int
    captured: int
    static: int
    partial_lines: int
    compiled: int = 0  # ``compile`` records: the aten ops of graphs the test compiled


class OpMap:
    """SQLite reverse index op -> tests, at ``state_dir / "ops.sqlite"``."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / OPS_DB
        self._conn: sqlite3.Connection | None = None

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._open()
        return self._conn

    def exists(self) -> bool:
        return self._conn is not None or self.path.is_file()

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30)  # wait out a concurrent ingest
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if not tables:
                conn.executescript(_SCHEMA)
                tables = {"schema_version"}
            row = None
            if "schema_version" in tables:
                row = conn.execute("SELECT version FROM schema_version").fetchone()
            if row is not None and row[0] in _MIGRATE:
                conn.executescript(_MIGRATE[row[0]])
                row = (SCHEMA_VERSION,)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise self._unusable(f"not a readable SQLite op map ({exc})") from exc
        if row is None or row[0] != SCHEMA_VERSION:
            conn.close()
            found = "no schema version" if row is None else f"schema version {row[0]}"
            raise self._unusable(f"{found}, expected {SCHEMA_VERSION}")
        return conn

    def _unusable(self, why: str) -> MemoryStoreError:
        return MemoryStoreError(
            f"{self.path}: {why}; hint: delete it and re-run `testcurator ops ingest FILE` "
            "(the op map is rebuilt from capture files)"
        )

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- writing -------------------------------------------------------------
    def ingest(self, jsonl_path: Path) -> IngestStats:
        """Load a capture file and its worker parts; one transaction, replaces by node id."""
        parts = capture_parts(Path(jsonl_path))
        if not parts:
            raise MissingPathError(jsonl_path, "capture file")
        records: list[OpRecord] = []
        partial = 0
        for part in parts:
            for record in read_records(part):
                if record is None:
                    partial += 1
                else:
                    records.append(record)
        self._store(records)
        by_source = {src: sum(r.source == src for r in records) for src in SOURCES}
        return IngestStats(len(parts), len(records), by_source["captured"], by_source["static"], partial,
                           compiled=by_source["compile"])

    def ingest_static(self, records: Iterable[OpRecord]) -> int:
        """Store static records (from collection); returns how many."""
        items = list(records)
        bad = [r.nodeid for r in items if r.source != "static"]
        if bad:
            raise BadInputError(f"ingest_static got non-static records: {bad[:3]}")
        self._store(items)
        return len(items)

    def store(self, records: Iterable[OpRecord]) -> int:
        """Store records read already (one transaction, replaces by node id and source)."""
        items = list(records)
        self._store(items)
        return len(items)

    def _store(self, records: list[OpRecord]) -> None:
        # Set-wise, in one transaction (nothing half-ingested): a record replaces the one of
        # the same node id and source (the last of the batch wins), with ids given here so
        # that every statement is one executemany. Row by row (SELECT, DELETE, INSERT per
        # record) this was most of the memory stage after the capture on a large tree.
        # Node id order: ids then grow with the unique index's key (appends, not scattered inserts).
        latest = sorted({(r.nodeid, r.source): r for r in records}.values(), key=lambda r: (r.nodeid, r.source))
        keys = [(r.nodeid, r.source) for r in latest]
        with self.conn as conn:
            conn.execute("BEGIN IMMEDIATE")  # explicit: the index DDL below is part of the transaction
            bulk = len(latest) >= max(BULK_RECORDS, conn.execute("SELECT count(*) FROM records").fetchone()[0] // 4)
            if bulk:
                conn.execute("PRAGMA cache_size = -65536")  # 64 MiB for the rebuild's sorts
                for name in _INDEXES:
                    conn.execute(f"DROP INDEX IF EXISTS {name}")
            for table in ("record_ops", "record_calls", "record_raised"):
                conn.executemany(f"DELETE FROM {table} WHERE record_id = "
                                 "(SELECT id FROM records WHERE node_id=? AND source=?)", keys)
            conn.executemany("DELETE FROM records WHERE node_id=? AND source=?", keys)
            first = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM records").fetchone()[0]
            conn.executemany(
                "INSERT INTO records (id, node_id, source, generic, device, dtype, op, module, outcome, error)"
                " VALUES (?,?,?,?,?,?,?,?,?,?)",
                [(first + i, r.nodeid, r.source, r.generic, r.device, r.dtype, r.op, r.module, r.outcome, r.error)
                 for i, r in enumerate(latest)])
            conn.executemany("INSERT OR IGNORE INTO record_ops VALUES (?,?,?)",
                             [(first + i, a, op_base(a)) for i, r in enumerate(latest) for a in r.aten])
            conn.executemany("INSERT OR IGNORE INTO record_calls VALUES (?,?)",
                             [(first + i, c) for i, r in enumerate(latest) for c in r.calls])
            conn.executemany("INSERT OR IGNORE INTO record_raised VALUES (?,?)",
                             [(first + i, c) for i, r in enumerate(latest) for c in r.raised])
            # The first example stays: any one call of a key is as good as another.
            conn.executemany("INSERT OR IGNORE INTO call_examples VALUES (?,?)",
                             sorted(kv for r in latest for kv in r.examples.items()))
            if bulk:
                for statement in _create_indexes(*_INDEXES).splitlines():
                    conn.execute(statement)

    # -- reading -------------------------------------------------------------
    def tests_for(self, op: str, dtype: str | None = None) -> list[OpHit]:
        """Tests using ``op``: ``aten::add`` (any overload), ``aten::add.Tensor`` (exact),
        or an OpInfo name such as ``add`` / ``nn.functional.relu`` (``@ops`` tests)."""
        if not self.exists():  # nothing ingested yet: reading must not create state
            return []
        text = op.strip()
        if "::" in text or text.startswith(("aten.", "prims.")):
            name = normalize_op(text)
            column = "o.aten_base" if "." not in name.partition("::")[2] else "o.aten"
            sql = (
                "SELECT r.generic, r.node_id, r.device, r.dtype, r.source, r.op,"
                " group_concat(o.aten, ' ') FROM records r JOIN record_ops o ON o.record_id = r.id"
                f" WHERE {column} = ?"
            )
        else:
            name = text
            sql = (
                "SELECT r.generic, r.node_id, r.device, r.dtype, r.source, r.op, ''"
                " FROM records r WHERE r.op = ?"
            )
        sql += " GROUP BY r.id ORDER BY r.generic, r.node_id, r.source"
        # Filtered here, not in SQL: a dtype pair's instance (``complex64_float32``) is an
        # instance of each of its dtypes.
        wanted = normalize_dtype(dtype) if dtype is not None else None
        return [
            OpHit(g, n, dev, dt, src, o, tuple(sorted(a.split())) if a else ())
            for g, n, dev, dt, src, o, a in self.conn.execute(sql, [name])
            if wanted is None or wanted in split_dtypes(dt)
        ]

    def ops_for_test(self, generic: str) -> list[OpUse]:
        """The aten ops any instance of ``Class::test`` uses, with where that is known from."""
        if not self.exists():
            return []
        rows = self.conn.execute(
            "SELECT o.aten, group_concat(DISTINCT r.source), count(DISTINCT r.node_id)"
            " FROM records r JOIN record_ops o ON o.record_id = r.id WHERE r.generic = ?"
            " GROUP BY o.aten ORDER BY o.aten",
            (generic,),
        )
        return [OpUse(a, tuple(sorted(s.split(","))), n) for a, s, n in rows]

    def instances(self, generic: str, path: str | None = None) -> dict[str, list[str]]:
        """Collected instances of ``Class::test`` per device: ``{"cpu": ["float32", ...]}``
        (dtype, or ``-`` for an instance without one); exact, from collection or capture."""
        if not self.exists():
            return {}
        rows = self.conn.execute(
            "SELECT DISTINCT node_id, device, dtype FROM records WHERE generic = ?", (generic,))
        out: dict[str, list[str]] = {}
        for nodeid, device, dtype in rows:
            if path is None or TestKey.parse(nodeid).file == path:
                out.setdefault(device or "-", []).append(dtype or "-")
        return {device: sorted(dtypes) for device, dtypes in sorted(out.items())}

    def captured(self) -> Iterator[OpRecord]:
        """Every captured record with its aten ops (what tier L1 covers ops with)."""
        if not self.exists():
            return
        ops = self._by_record("record_ops", "aten")
        rows = self.conn.execute("SELECT id, node_id, generic, device, dtype, op, module, outcome FROM records "
                                 "WHERE source = 'captured' ORDER BY node_id")
        for rid, node_id, generic, device, dtype, op, module, outcome in rows:
            yield OpRecord(node_id, generic, "captured", device=device, dtype=dtype, op=op, module=module,
                           outcome=outcome, aten=tuple(ops.get(rid, ())))

    def _by_record(self, table: str, column: str) -> dict[int, list[str]]:
        """``column`` of ``table`` (record_ops.aten, record_calls.call) per record id, sorted."""
        out: dict[int, list[str]] = {}
        for record_id, value in self.conn.execute(
                f"SELECT record_id, {column} FROM {table} ORDER BY record_id, {column}"):  # noqa: S608 - fixed names
            out.setdefault(record_id, []).append(value)
        return out

    def calls(self) -> dict[str, str | None]:
        """Every distinct call any captured test made -> its replayable example (None: none
        was recorded, so the probe cannot replay it)."""
        if not self.exists():
            return {}
        rows = self.conn.execute("SELECT DISTINCT c.call, e.example FROM record_calls c "
                                 "LEFT JOIN call_examples e ON e.call = c.call ORDER BY c.call")
        return dict(rows)

    def instance_calls(self) -> Iterator[InstanceCalls]:
        """Every captured record with the calls it made."""
        if not self.exists():
            return
        calls, raised = self._by_record("record_calls", "call"), self._by_record("record_raised", "call")
        rows = self.conn.execute("SELECT id, node_id, generic, device, dtype, op, module FROM records "
                                 "WHERE source = 'captured' ORDER BY node_id")
        for rid, node_id, generic, device, dtype, op, module in rows:
            yield InstanceCalls(node_id, generic, device, dtype, op, module, tuple(calls.get(rid, ())),
                                tuple(raised.get(rid, ())))

    def uncaptured_instances(self, *, plain: bool = False) -> Iterator[InstanceCalls]:
        """Every collected @ops or @modules instance no capture ran (left out by the budget, or
        of a kind captured at another dtype), without calls: its OpInfo op or ModuleInfo is all
        that is known of it. ``plain``: those of neither too."""
        if not self.exists():
            return
        subject = "" if plain else "AND (op IS NOT NULL OR module IS NOT NULL) "
        rows = self.conn.execute(
            "SELECT node_id, generic, device, dtype, op, module FROM records r WHERE source = 'static' "
            f"{subject}AND NOT EXISTS (SELECT 1 FROM records c WHERE c.node_id = r.node_id "
            "AND c.source = 'captured') ORDER BY node_id")
        for node_id, generic, device, dtype, op, module in rows:
            yield InstanceCalls(node_id, generic, device, dtype, op, module, ())

    def counts(self) -> dict[str, int]:
        """Records per source, and distinct aten ops: for summaries."""
        out = {src: 0 for src in SOURCES}
        out.update(dict(self.conn.execute("SELECT source, count(*) FROM records GROUP BY source")))
        out["aten_ops"] = self.conn.execute("SELECT count(DISTINCT aten) FROM record_ops").fetchone()[0]
        return out
