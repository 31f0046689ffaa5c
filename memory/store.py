"""SQLite store of the test index: one file under the state directory, with a schema version.

Each indexed file is replaced in one transaction (its classes, instantiations and tests go
together), so a killed build leaves every file either old or new, never mixed. A file that
is not a database, or one written by another schema version, raises
:class:`MemoryStoreError` naming the path and the way out; it is never silently reused.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from testcurator.errors import MemoryStoreError
from testcurator.memory.collect import Decorator, FileIndex, IndexedTest

SCHEMA_VERSION = 1
HINT = "delete it or run `testcurator memory build --rebuild`"

_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files(path TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL,
    sha256 TEXT NOT NULL, status TEXT NOT NULL, error TEXT, warnings TEXT NOT NULL,
    n_tests INTEGER NOT NULL, indexed_at REAL NOT NULL);
CREATE TABLE classes(path TEXT NOT NULL, name TEXT NOT NULL, line INTEGER NOT NULL,
    bases TEXT NOT NULL, decorators TEXT NOT NULL, PRIMARY KEY(path, name));
CREATE TABLE instantiations(path TEXT NOT NULL, cls TEXT NOT NULL, kind TEXT NOT NULL,
    line INTEGER NOT NULL, only_for TEXT, except_for TEXT);
CREATE TABLE tests(path TEXT NOT NULL, generic TEXT NOT NULL, cls TEXT, name TEXT NOT NULL,
    defined_in TEXT, line_start INTEGER NOT NULL, line_end INTEGER NOT NULL,
    content_hash TEXT NOT NULL, decorators TEXT NOT NULL, calls TEXT NOT NULL,
    methods TEXT NOT NULL, docstring TEXT, device_generic INTEGER NOT NULL,
    parametrized INTEGER NOT NULL, instances_estimate INTEGER, summary TEXT NOT NULL,
    PRIMARY KEY(path, generic));
CREATE INDEX tests_generic ON tests(generic);
CREATE INDEX tests_hash ON tests(content_hash);
CREATE INDEX inst_path ON instantiations(path);
CREATE TABLE summaries(content_hash TEXT PRIMARY KEY, text TEXT NOT NULL, author TEXT NOT NULL,
    updated REAL NOT NULL);
"""


@dataclass(frozen=True)
class FileState:
    """What a rebuild compares to decide whether a file changed."""

    path: str  # relative to the torch root, POSIX separators
    mtime_ns: int
    size: int
    sha256: str
    status: str = "ok"  # "ok" | "error"
    error: str | None = None
    warnings: tuple[str, ...] = ()
    n_tests: int = 0


@dataclass(frozen=True)
class StoredTest:
    """Everything the index knows about one generic test in one file."""

    path: str
    generic: str
    cls: str | None
    name: str
    defined_in: str | None
    line_start: int
    line_end: int
    content_hash: str
    decorators: tuple[Decorator, ...]
    calls: tuple[str, ...]
    methods: tuple[str, ...]
    docstring: str | None
    device_generic: bool
    parametrized: bool
    instances_estimate: int | None
    summary: str
    summary_author: str  # "offline" or whoever wrote it through set_summary


_T = TypeVar("_T")


def _guarded(method: Callable[..., _T]) -> Callable[..., _T]:
    """Turn sqlite's low-level errors (a corrupted page found mid-query) into ours."""

    @functools.wraps(method)
    def wrapper(self: MemoryStore, *args: Any, **kwargs: Any) -> _T:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            raise MemoryStoreError(f"memory database {self.path} is unusable ({exc}); {HINT}") from exc

    return wrapper


class MemoryStore:
    """The SQLite index. Use :meth:`open`; close it (or use it as a context manager)."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._conn = conn

    @classmethod
    def open(cls, path: Path, *, create: bool = True) -> MemoryStore:
        if not path.exists() and not create:
            raise MemoryStoreError(f"no memory at {path}; run `testcurator memory build` first")
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path)
        try:
            _check_schema(conn, path, create)
            # WAL + NORMAL: one fsync per checkpoint instead of per transaction; a crash
            # still never leaves a half-applied transaction.
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        except BaseException:
            conn.close()
            raise
        return cls(path, conn)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------

    @_guarded
    def set_meta(self, key: str, value: str) -> None:
        with self._conn:
            self._conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    @_guarded
    def replace_files(self, items: Iterable[tuple[FileState, FileIndex | None, list[tuple[IndexedTest, str]]]]) -> None:
        """Replace several files' rows in one transaction; index None means 'state only'."""
        with self._conn:
            for state, index, tests in items:
                if index is not None:
                    self._delete_rows(state.path)
                    self._insert_index(state.path, index, tests)
                self._conn.execute(
                    "INSERT OR REPLACE INTO files VALUES (?,?,?,?,?,?,?,?,?)",
                    (state.path, state.mtime_ns, state.size, state.sha256, state.status, state.error,
                     json.dumps(list(state.warnings)), state.n_tests, time.time()),
                )

    @_guarded
    def remove_files(self, paths: Iterable[str]) -> None:
        with self._conn:
            for path in paths:
                self._delete_rows(path)
                self._conn.execute("DELETE FROM files WHERE path = ?", (path,))

    @_guarded
    def set_summary(self, content_hash: str, text: str, author: str) -> None:
        """Record a summary written by someone other than the offline summariser (an LLM)."""
        with self._conn:
            self._conn.execute("INSERT OR REPLACE INTO summaries VALUES (?,?,?,?)",
                               (content_hash, text, author, time.time()))

    @_guarded
    def drop_summaries(self, content_hashes: Iterable[str]) -> int:
        """Forget written summaries: those hashes show their offline summary again."""
        with self._conn:
            cur = self._conn.executemany("DELETE FROM summaries WHERE content_hash = ?", [(h,) for h in content_hashes])
        return cur.rowcount

    @_guarded
    def prune_summaries(self) -> int:
        """Drop written summaries whose content hash no test has any more."""
        with self._conn:
            cur = self._conn.execute(
                "DELETE FROM summaries WHERE content_hash NOT IN (SELECT content_hash FROM tests)")
        return cur.rowcount

    def _delete_rows(self, path: str) -> None:
        for table in ("classes", "instantiations", "tests"):
            self._conn.execute(f"DELETE FROM {table} WHERE path = ?", (path,))

    def _insert_index(self, path: str, index: FileIndex, tests: list[tuple[IndexedTest, str]]) -> None:
        self._conn.executemany(
            "INSERT OR REPLACE INTO classes VALUES (?,?,?,?,?)",
            [(path, c.name, c.line, json.dumps(c.bases), _decos_json(c.decorators)) for c in index.classes])
        self._conn.executemany(
            "INSERT INTO instantiations VALUES (?,?,?,?,?,?)",
            [(path, i.cls, i.kind, i.line, _opt_json(i.only_for), _opt_json(i.except_for))
             for i in index.instantiations])
        self._conn.executemany(
            "INSERT OR REPLACE INTO tests VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [(path, r.generic, r.cls, r.fn.name, r.fn.defined_in, r.fn.line_start, r.fn.line_end,
              r.fn.content_hash, _decos_json(r.fn.decorators), json.dumps(r.fn.calls),
              json.dumps(r.fn.methods), r.fn.docstring, int(r.device_generic), int(r.parametrized),
              r.instances_estimate, summary) for r, summary in tests])

    # -- reading ---------------------------------------------------------------------------

    @_guarded
    def get_meta(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    @_guarded
    def file_states(self) -> dict[str, FileState]:
        rows = self._conn.execute("SELECT path, mtime_ns, size, sha256, status, error, warnings, n_tests FROM files")
        return {r[0]: FileState(r[0], r[1], r[2], r[3], r[4], r[5], tuple(json.loads(r[6])), r[7]) for r in rows}

    @_guarded
    def tests(self, where: str = "", params: tuple[Any, ...] = ()) -> list[StoredTest]:
        sql = (
            "SELECT t.*, COALESCE(s.text, t.summary), COALESCE(s.author, 'offline') FROM tests t "
            "LEFT JOIN summaries s ON s.content_hash = t.content_hash "
            + (f"WHERE {where} " if where else "") + "ORDER BY t.path, t.line_start, t.generic"
        )
        return [_stored_test(row) for row in self._conn.execute(sql, params)]

    @_guarded
    def test_hashes(self) -> list[tuple[str, str, str, tuple[str, ...]]]:
        """(path, generic, content hash, decorator names) of every test: what comparing two
        trees needs, without building every test's record."""
        rows = self._conn.execute("SELECT path, generic, content_hash, decorators FROM tests")
        return [(r[0], r[1], r[2], tuple(d["name"] for d in json.loads(r[3]))) for r in rows]

    @_guarded
    def generic_names(self) -> set[str]:
        """The generic ``Class::test`` name of every test."""
        return {r[0] for r in self._conn.execute("SELECT DISTINCT generic FROM tests")}

    @_guarded
    def summary_hashes(self, author_prefix: str) -> list[str]:
        """Content hashes of current tests whose summary was written by an author whose name
        starts with ``author_prefix``, sorted."""
        rows = self._conn.execute(
            "SELECT DISTINCT s.content_hash FROM summaries s JOIN tests t ON t.content_hash = s.content_hash "
            "WHERE substr(s.author, 1, ?) = ? ORDER BY s.content_hash", (len(author_prefix), author_prefix))
        return [r[0] for r in rows]

    @_guarded
    def instantiations(self, path: str) -> list[dict[str, Any]]:
        rows = self._conn.execute(
            "SELECT cls, kind, line, only_for, except_for FROM instantiations WHERE path = ? ORDER BY line", (path,))
        return [{"cls": r[0], "kind": r[1], "line": r[2], "only_for": _from_opt(r[3]),
                 "except_for": _from_opt(r[4])} for r in rows]

    @_guarded
    def class_bases(self, path: str, name: str) -> tuple[str, ...] | None:
        row = self._conn.execute("SELECT bases FROM classes WHERE path = ? AND name = ?", (path, name)).fetchone()
        return None if row is None else tuple(json.loads(row[0]))

    @_guarded
    def counts(self) -> dict[str, int]:
        one = self._conn.execute
        return {
            "files": one("SELECT COUNT(*) FROM files").fetchone()[0],
            "files_failed": one("SELECT COUNT(*) FROM files WHERE status != 'ok'").fetchone()[0],
            "tests": one("SELECT COUNT(*) FROM tests").fetchone()[0],
            "content_hashes": one("SELECT COUNT(DISTINCT content_hash) FROM tests").fetchone()[0],
        }

    def iter_hash_texts(self) -> Iterator[tuple[str, str, str]]:
        """(content_hash, generic, summary) for every test, ordered so the first per hash wins."""
        yield from ((t.content_hash, t.generic, t.summary) for t in
                    sorted(self.tests(), key=lambda t: (t.content_hash, t.generic, t.path)))


def _check_schema(conn: sqlite3.Connection, path: Path, create: bool) -> None:
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            if not create:
                raise MemoryStoreError(f"memory database {path} is empty; run `testcurator memory build`")
            with conn:
                conn.executescript(_SCHEMA)
                conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            return
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() if "meta" in tables else None
    except sqlite3.DatabaseError as exc:
        raise MemoryStoreError(f"{path} is not a usable memory database ({exc}); {HINT}") from exc
    found = row[0] if row else "none"
    if found != str(SCHEMA_VERSION):
        raise MemoryStoreError(
            f"memory database {path} has schema version {found}, this testcurator needs "
            f"{SCHEMA_VERSION}; {HINT}")


def _decos_json(decos: tuple[Decorator, ...]) -> str:
    return json.dumps([{"name": d.name, "args": list(d.args), "kwargs": [list(kv) for kv in d.kwargs],
                       "line": d.line} for d in decos])


def _opt_json(value: tuple[str, ...] | None) -> str | None:
    return None if value is None else json.dumps(list(value))


def _from_opt(text: str | None) -> list[str] | None:
    return None if text is None else list(json.loads(text))


def _stored_test(row: tuple[Any, ...]) -> StoredTest:
    decos = tuple(Decorator(d["name"], tuple(d["args"]), tuple(tuple(kv) for kv in d["kwargs"]), d["line"])
                  for d in json.loads(row[8]))
    return StoredTest(
        path=row[0], generic=row[1], cls=row[2], name=row[3], defined_in=row[4], line_start=row[5],
        line_end=row[6], content_hash=row[7], decorators=decos, calls=tuple(json.loads(row[9])),
        methods=tuple(json.loads(row[10])), docstring=row[11], device_generic=bool(row[12]),
        parametrized=bool(row[13]), instances_estimate=row[14], summary=row[16], summary_author=row[17],
    )
