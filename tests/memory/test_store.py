from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from testcurator.errors import MemoryStoreError
from testcurator.memory.index import parse_source
from testcurator.memory.store import SCHEMA_VERSION, FileState, MemoryStore

SRC = b"""import torch
class TestA(TestCase):
    @dtypes(torch.float32)
    def test_a(self, device, dtype):
        torch.ones(1)
class TestB(TestA):
    pass
"""


def _fill(store: MemoryStore, path: str = "test/test_a.py", src: bytes = SRC) -> None:
    ix = parse_source(src, path)
    state = FileState(path, 1, len(src), "sha", n_tests=len(ix.tests))
    store.replace_files([(state, ix, [(t, f"summary of {t.generic}") for t in ix.tests])])


def test_roundtrip(tmp_path: Path) -> None:
    with MemoryStore.open(tmp_path / "m.sqlite") as store:
        _fill(store)
        tests = store.tests()
        assert [t.generic for t in tests] == ["TestA::test_a", "TestB::test_a"]
        assert tests[0].decorators[0].name == "dtypes" and tests[0].decorators[0].args == ("torch.float32",)
        assert tests[1].defined_in == "TestA" and tests[0].calls == ("torch.ones",)
        assert tests[0].summary == "summary of TestA::test_a" and tests[0].summary_author == "offline"
        assert store.counts() == {"files": 1, "files_failed": 0, "tests": 2, "content_hashes": 1}
        assert store.file_states()["test/test_a.py"].size == len(SRC)


def test_replacing_a_file_drops_its_old_rows(tmp_path: Path) -> None:
    with MemoryStore.open(tmp_path / "m.sqlite") as store:
        _fill(store)
        _fill(store, src=b"class TestC(TestCase):\n    def test_c(self): pass\n")
        assert [t.generic for t in store.tests()] == ["TestC::test_c"]
        store.remove_files(["test/test_a.py"])
        assert store.tests() == [] and store.file_states() == {}


def test_written_summary_wins_and_is_pruned(tmp_path: Path) -> None:
    with MemoryStore.open(tmp_path / "m.sqlite") as store:
        _fill(store)
        h = store.tests()[0].content_hash
        store.set_summary(h, "LLM words", "llm:model-x")
        assert {(t.summary, t.summary_author) for t in store.tests()} == {("LLM words", "llm:model-x")}
        store.set_summary("0" * 16, "orphan", "llm")
        assert store.prune_summaries() == 1


def test_the_light_queries_agree_with_the_records(tmp_path: Path) -> None:
    """What comparing trees, the rails and dropping LLM summaries read without whole records."""
    with MemoryStore.open(tmp_path / "m.sqlite") as store:
        _fill(store)
        _fill(store, "test/test_c.py", b"class TestC(TestCase):\n    def test_c(self): pass\n")
        tests = store.tests()
        assert sorted(store.test_hashes()) == sorted(
            (t.path, t.generic, t.content_hash, tuple(d.name for d in t.decorators)) for t in tests)
        assert store.generic_names() == {"TestA::test_a", "TestB::test_a", "TestC::test_c"}
        a, c = tests[0].content_hash, tests[-1].content_hash
        store.set_summary(a, "LLM words", "llm:model-x")
        store.set_summary(c, "a person's words", "human")
        store.set_summary("0" * 16, "orphan", "llm:model-x")  # no test has this hash
        assert store.summary_hashes("llm:") == [a]


def test_reopen_keeps_data(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    with MemoryStore.open(db) as store:
        _fill(store)
    with MemoryStore.open(db, create=False) as store:
        assert len(store.tests()) == 2


def _garbage(db: Path) -> None:
    db.write_bytes(b"this is not sqlite" * 100)


def _old_schema(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)")
        conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION - 1),))
    conn.close()


def _foreign_db(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE other(x)")
    conn.close()


@pytest.mark.parametrize(("damage", "needle"), [
    (_garbage, "not a usable memory database"),
    (_old_schema, f"schema version {SCHEMA_VERSION - 1}"),
    (_foreign_db, "schema version none"),
])
def test_unusable_database_raises_with_path_and_hint(tmp_path: Path, damage, needle: str) -> None:
    db = tmp_path / "m.sqlite"
    damage(db)
    with pytest.raises(MemoryStoreError) as info:
        MemoryStore.open(db)
    message = str(info.value)
    assert needle in message and str(db) in message and "--rebuild" in message
    assert info.value.exit_code == 2


def test_missing_database_when_reading(tmp_path: Path) -> None:
    with pytest.raises(MemoryStoreError, match="memory build"):
        MemoryStore.open(tmp_path / "nope.sqlite", create=False)
    assert not (tmp_path / "nope.sqlite").exists()
