"""The memory of runs: every run's identity and per-instance outcomes, night after night.

``<state-dir>/history.sqlite`` keeps, per run, its identity (:class:`RunIdentity`: torch
version, upstream revision, backend digest, config digests, date), each kept test's source
hash, every instance's outcome in each execution phase (``judge``: the standing configs as
they stood; ``draft``; ``verify``; each record with its attempts and whether it passed only
on a retry), and per file how many instances passed, were held back and failed.

What a night is judged against comes from here: the last run in which a test passed, and
whether anything changed since (:mod:`testcurator.pipelines.nights`). The store is bounded:
the last ``keep`` runs keep their outcomes; older runs are compacted to their identity and
per-file counts, which is all the trend chart needs.

One writer at a time: the run lock (``testcurator.lock``) serialises runs on a state dir.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from testcurator.errors import MemoryStoreError
from testcurator.runner.results.records import TestRecord
from testcurator.vocab import FAILING, NOT_RUN, PASSED_EVIDENCE, UNEXPECTED_PASS, TestKey, instance_key

HISTORY_DB = "history.sqlite"
SCHEMA_VERSION = 1
DEFAULT_KEEP = 60
PHASES = ("judge", "draft", "verify")
_EVIDENCE_CHARS = 300
_SCHEMA = f"""
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version SELECT {SCHEMA_VERSION} WHERE NOT EXISTS (SELECT 1 FROM schema_version);
CREATE TABLE IF NOT EXISTS runs (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT UNIQUE NOT NULL, kind TEXT NOT NULL,
    date TEXT NOT NULL, out_dir TEXT NOT NULL, backend TEXT NOT NULL, torch_version TEXT NOT NULL,
    upstream_revision TEXT NOT NULL, backend_digest TEXT NOT NULL, config_digest TEXT NOT NULL,
    standing_digest TEXT NOT NULL, exit_code INTEGER, compacted INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS instances (id INTEGER PRIMARY KEY, file TEXT NOT NULL, generic TEXT NOT NULL,
    instance TEXT NOT NULL, UNIQUE (instance, generic));
CREATE TABLE IF NOT EXISTS outcomes (seq INTEGER NOT NULL, phase TEXT NOT NULL, iid INTEGER NOT NULL,
    outcome TEXT NOT NULL, attempts INTEGER NOT NULL, flaky INTEGER NOT NULL, failure_class TEXT, evidence TEXT,
    PRIMARY KEY (seq, phase, iid));
CREATE TABLE IF NOT EXISTS sources (seq INTEGER NOT NULL, file TEXT NOT NULL, generic TEXT NOT NULL,
    hash TEXT NOT NULL, PRIMARY KEY (seq, file, generic));
CREATE TABLE IF NOT EXISTS counts (seq INTEGER NOT NULL, file TEXT NOT NULL, passing INTEGER NOT NULL,
    held_back INTEGER NOT NULL, failing INTEGER NOT NULL, PRIMARY KEY (seq, file));
COMMIT;
"""


@dataclass(frozen=True)
class RunIdentity:
    """What a run ran: the inputs whose change explains a change of outcome."""

    run_id: str
    kind: str  # nightly | upgrade
    date: str
    out_dir: str
    backend: str
    torch_version: str
    upstream_revision: str
    backend_digest: str
    config_digest: str  # the configs the run ended with
    standing_digest: str  # the configs it judged ("" on a first run)
    exit_code: int | None = None
    seq: int = 0  # its place in the history (0 until recorded)
    compacted: bool = False  # its outcomes are gone (beyond the runs kept); identity and counts remain

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunIdentity:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


# A run's status of a test comes from one phase, so that runs compare like with like: the
# standing configs' run (judge), else, on a first run, the verification of the configs it
# wrote (the configs the next night judges), else the draft. Mixing them read a non-strict
# xfail that failed in one night's draft and passed in the next night's judge as a fix and a
# flip with nothing changed (the real corpus, test_testing's test_subtest_expected_failure).
STATUS_PHASES = ("judge", "verify", "draft")


def status(outcomes: Iterable[tuple[str, str | None]]) -> str:
    """One test's status in one run, from its instances' (outcome, failure class): ``F``
    when one failed (an ``xfailed`` instance failed too), ``P`` when some passed and none
    failed (a strict xfail that passed is reported failed, class ``unexpected_pass``: a
    pass), ``-`` when none ran."""
    seen = {"passed" if cls == UNEXPECTED_PASS else outcome for outcome, cls in outcomes}
    if seen & (FAILING | {"xfailed"}):
        return "F"
    return "P" if seen & PASSED_EVIDENCE else "-"


def passed(record: TestRecord) -> bool:
    """Whether an instance passed: a pass, an xfail that passed, or a strict xfail that did."""
    return record.outcome in PASSED_EVIDENCE or record.failure_class == UNEXPECTED_PASS


def _counts(records: Sequence[TestRecord]) -> dict[str, tuple[int, int, int]]:
    per: dict[str, list[int]] = {}
    for r in records:
        row = per.setdefault(TestKey.parse(r.nodeid).file, [0, 0, 0])
        row[0 if passed(r) else 1 if r.outcome in NOT_RUN else 2] += 1
    return {f: (p, h, x) for f, (p, h, x) in per.items()}


class History:
    """The history store of one state directory."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / HISTORY_DB
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, timeout=60)
        try:
            self.conn.executescript(_SCHEMA)
            version = self.conn.execute("SELECT version FROM schema_version").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise MemoryStoreError(f"{self.path}: not a readable run history ({exc}); move it aside to start a new one") \
                from exc
        if version != SCHEMA_VERSION:
            self.conn.close()
            raise MemoryStoreError(f"{self.path}: history schema {version}, this testcurator reads {SCHEMA_VERSION}")

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self.conn:  # one transaction: a run is recorded whole or not at all
            yield self.conn

    # --- writing ----------------------------------------------------------------------------
    def record(self, identity: RunIdentity, sources: Iterable[tuple[str, str, str]],
               phases: Mapping[str, Sequence[TestRecord]], *, keep: int = DEFAULT_KEEP) -> RunIdentity:
        """Store one run (replacing an earlier record of the same run id, as a resumed run
        reports again); returns its identity with its ``seq``. Compacts beyond ``keep``."""
        with self._tx() as db:
            db.execute("DELETE FROM runs WHERE run_id=?", (identity.run_id,))
            row = {k: v for k, v in identity.to_json().items() if k not in ("seq", "compacted")}
            cur = db.execute(f"INSERT INTO runs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                             tuple(row.values()))
            seq = int(cur.lastrowid or 0)
            db.executemany("INSERT OR REPLACE INTO sources VALUES (?, ?, ?, ?)", ((seq, *s) for s in sources))
            for phase, records in phases.items():
                db.executemany("INSERT OR REPLACE INTO outcomes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                               ((seq, phase, self._iid(db, r), r.outcome, r.attempts, int(r.flaky), r.failure_class,
                                 (r.evidence or "")[:_EVIDENCE_CHARS] or None) for r in records))
            curated = next((phases[p] for p in ("verify", "judge", "draft") if phases.get(p)), ())
            db.executemany("INSERT INTO counts VALUES (?, ?, ?, ?, ?)",
                           ((seq, f, *c) for f, c in sorted(_counts(curated).items())))
            if self._compact(db, keep):
                self._orphans(db)
        return RunIdentity.from_json({**identity.to_json(), "seq": seq})

    @staticmethod
    def _iid(db: sqlite3.Connection, record: TestRecord) -> int:
        key = instance_key(record.nodeid, record.generic)
        generic = record.generic or TestKey.parse(record.nodeid).name
        db.execute("INSERT OR IGNORE INTO instances (file, generic, instance) VALUES (?, ?, ?)",
                   (TestKey.parse(record.nodeid).file, generic, key))
        return int(db.execute("SELECT id FROM instances WHERE instance=? AND generic=?", (key, generic)).fetchone()[0])

    @staticmethod
    def _compact(db: sqlite3.Connection, keep: int) -> list[int]:
        """Runs beyond the last ``keep`` lose their outcomes and sources; the seqs compacted."""
        old = [r[0] for r in db.execute("SELECT seq FROM runs WHERE compacted=0 ORDER BY seq DESC LIMIT -1 OFFSET ?",
                                        (max(keep, 1),))]
        for seq in old:
            db.execute("DELETE FROM outcomes WHERE seq=?", (seq,))
            db.execute("DELETE FROM sources WHERE seq=?", (seq,))
            db.execute("UPDATE runs SET compacted=1 WHERE seq=?", (seq,))
        return old

    @staticmethod
    def _orphans(db: sqlite3.Connection) -> None:
        db.execute("DELETE FROM counts WHERE seq NOT IN (SELECT seq FROM runs)")
        db.execute("DELETE FROM outcomes WHERE seq NOT IN (SELECT seq FROM runs)")
        db.execute("DELETE FROM instances WHERE id NOT IN (SELECT DISTINCT iid FROM outcomes)")

    def set_exit_code(self, run_id: str, code: int) -> None:
        with self._tx() as db:
            db.execute("UPDATE runs SET exit_code=? WHERE run_id=?", (code, run_id))

    # --- reading ----------------------------------------------------------------------------
    def runs(self, out_dir: str | None = None, *, before: int | None = None, full_only: bool = False) -> list[RunIdentity]:
        """Runs oldest first; of one ``--out`` when given; ``before`` a seq; with outcomes only."""
        where, args = ["1=1"], []
        if out_dir is not None:
            where.append("out_dir=?")
            args.append(out_dir)
        if before is not None:
            where.append("seq<?")
            args.append(before)
        if full_only:
            where.append("compacted=0")
        names = [f.name for f in fields(RunIdentity)]
        rows = self.conn.execute(f"SELECT {', '.join(names)} FROM runs WHERE {' AND '.join(where)} ORDER BY seq", args)
        return [RunIdentity(**{**dict(zip(names, row)), "compacted": bool(row[-1])}) for row in rows]

    def sources(self, seq: int) -> dict[TestKey, str]:
        return {TestKey.of(f, g): h for f, g, h in self.conn.execute("SELECT file, generic, hash FROM sources WHERE seq=?",
                                                                     (seq,))}

    def statuses(self, seqs: Sequence[int]) -> dict[TestKey, dict[int, str]]:
        """Per test, its status (:func:`status`) in each of the runs ``seqs`` that ran it, each
        run's from one phase: :data:`STATUS_PHASES`' first that the run has."""
        if not seqs:
            return {}
        marks = ", ".join("?" * len(seqs))
        rows = self.conn.execute(
            f"SELECT o.seq, o.phase, i.file, i.generic, o.outcome, o.failure_class FROM outcomes o "
            f"JOIN instances i ON i.id=o.iid WHERE o.seq IN ({marks}) AND o.phase IN "
            f"({', '.join('?' * len(STATUS_PHASES))})", (*seqs, *STATUS_PHASES)).fetchall()
        present: dict[int, set[str]] = {}
        for seq, phase, *_ in rows:
            present.setdefault(seq, set()).add(phase)
        chosen = {seq: next(p for p in STATUS_PHASES if p in phases) for seq, phases in present.items()}
        outcomes: dict[TestKey, dict[int, list[tuple[str, str | None]]]] = {}
        for seq, phase, file, generic, outcome, cls in rows:
            if phase == chosen[seq]:
                outcomes.setdefault(TestKey.of(file, generic), {}).setdefault(seq, []).append((outcome, cls))
        return {key: {seq: s for seq, outs in per.items() if (s := status(outs)) != "-"}
                for key, per in outcomes.items()}

    def counts(self, out_dir: str | None = None) -> dict[int, dict[str, tuple[int, int, int]]]:
        """Per run seq, per file: (passing, held back, failing) instances of its curated run."""
        sql = "SELECT c.seq, c.file, c.passing, c.held_back, c.failing FROM counts c JOIN runs r ON r.seq=c.seq"
        rows = self.conn.execute(sql + (" WHERE r.out_dir=?" if out_dir else ""), (out_dir,) if out_dir else ())
        out: dict[int, dict[str, tuple[int, int, int]]] = {}
        for seq, file, p, h, f in rows:
            out.setdefault(seq, {})[file] = (p, h, f)
        return out

    def failures(self, seq: int, phase: str) -> dict[str, tuple[str, str | None, str | None]]:
        """instance key -> (outcome, failure class, evidence) of the failing instances of a phase."""
        rows = self.conn.execute("SELECT i.instance, o.outcome, o.failure_class, o.evidence FROM outcomes o JOIN "
                                 "instances i ON i.id=o.iid WHERE o.seq=? AND o.phase=?", (seq, phase))
        return {k: (o, c, e) for k, o, c, e in rows if o in FAILING}
