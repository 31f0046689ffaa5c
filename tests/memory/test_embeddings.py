"""EmbeddingStore on a real chromadb directory: incremental sync, queries, rebuild."""

from __future__ import annotations

import fcntl
import hashlib
import math
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from testcurator.errors import BadInputError, MemoryStoreError
from testcurator.memory import embeddings
from testcurator.memory.embeddings import EmbeddingStore, SyncStats
from testcurator.memory.minilm import MiniLMEmbedder


class FakeEmbedder:
    """Deterministic unit vectors from a hash of the text; remembers what it embedded."""

    def __init__(self, name: str = "fake-16", dim: int = 16) -> None:
        self.name = name
        self.dim = dim
        self.seen: list[str] = []

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        self.seen.extend(texts)
        out = []
        for text in texts:
            raw = hashlib.sha256(text.encode()).digest()[: self.dim]
            vec = [b / 255.0 + 0.01 for b in raw]
            norm = math.sqrt(sum(v * v for v in vec))
            out.append([v / norm for v in vec])
        return out


TEXTS = {"h-add": "adds two tensors", "h-mul": "multiplies two tensors", "h-view": "views a tensor"}


@pytest.fixture
def fake() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def store(tmp_path: Path, fake: FakeEmbedder) -> EmbeddingStore:
    s = EmbeddingStore(tmp_path, embedder=fake)
    yield s
    s.close()


@pytest.mark.parametrize(
    ("second", "expected", "embedded"),
    [
        (TEXTS, (0, 0, 3), []),
        ({**TEXTS, "h-new": "a new test"}, (1, 0, 3), ["a new test"]),
        ({"h-add": TEXTS["h-add"], "h-new2": "changed"}, (1, 2, 1), ["changed"]),
        ({}, (0, 3, 0), []),
    ],
)
def test_sync_embeds_only_what_changed(
    store: EmbeddingStore, fake: FakeEmbedder, second: dict[str, str],
    expected: tuple[int, int, int], embedded: list[str],
) -> None:
    first = store.sync(TEXTS)
    assert (first.added, first.removed, first.kept) == (3, 0, 0)
    fake.seen.clear()
    stats = store.sync(second)
    assert isinstance(stats, SyncStats)
    assert (stats.added, stats.removed, stats.kept) == expected
    assert fake.seen == embedded
    assert store.stored_ids() == set(second)


def test_reopened_store_keeps_vectors(tmp_path: Path) -> None:
    first = EmbeddingStore(tmp_path, embedder=FakeEmbedder())
    first.sync(TEXTS)
    first.close()
    again_fake = FakeEmbedder()
    again = EmbeddingStore(tmp_path, embedder=again_fake)
    stats = again.sync(TEXTS)
    again.close()
    assert (stats.added, stats.kept) == (0, 3)
    assert again_fake.seen == []


def test_query_and_similar(store: EmbeddingStore) -> None:
    store.sync(TEXTS)
    hits = store.query("multiplies two tensors", k=2)
    assert hits[0][0] == "h-mul" and hits[0][1] == pytest.approx(0.0, abs=1e-5)
    assert len(hits) == 2 and hits[0][1] <= hits[1][1]
    similar = store.similar("h-add", k=5)
    assert {h for h, _ in similar} == {"h-mul", "h-view"}
    with pytest.raises(BadInputError, match="no embedding stored"):
        store.similar("h-missing")


def test_query_on_empty_store(store: EmbeddingStore) -> None:
    assert store.query("anything") == []


def test_progress_reports_each_batch(store: EmbeddingStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embeddings, "ADD_BATCH", 2)
    calls: list[tuple[int, int]] = []
    texts = {f"h{i}": f"text {i}" for i in range(5)}
    store.sync(texts, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(2, 5), (4, 5), (5, 5)]


def _garbage_sqlite(chroma: Path) -> None:
    (chroma / "chroma.sqlite3").write_bytes(os.urandom(4096))


def _truncated_sqlite(chroma: Path) -> None:
    db = chroma / "chroma.sqlite3"
    db.write_bytes(db.read_bytes()[:20000])


def _file_instead_of_dir(chroma: Path) -> None:
    import shutil

    shutil.rmtree(chroma)
    chroma.write_text("not a directory")


@pytest.mark.parametrize("damage", [_garbage_sqlite, _truncated_sqlite, _file_instead_of_dir])
def test_broken_directory_is_moved_aside_and_rebuilt(tmp_path: Path, damage) -> None:
    first = EmbeddingStore(tmp_path, embedder=FakeEmbedder())
    first.sync(TEXTS)
    first.close()
    damage(tmp_path / "chroma")
    fake = FakeEmbedder()
    store = EmbeddingStore(tmp_path, embedder=fake)
    with pytest.warns(RuntimeWarning, match=r"could not be opened .*moved it to .*chroma\.broken"):
        stats = store.sync(TEXTS)
    store.close()
    assert (stats.added, stats.kept) == (3, 0)  # defined outcome: everything re-embedded
    assert sorted(fake.seen) == sorted(TEXTS.values())
    assert (tmp_path / "chroma.broken").exists() and (tmp_path / "chroma").is_dir()


def test_changing_embedder_drops_old_vectors(tmp_path: Path) -> None:
    first = EmbeddingStore(tmp_path, embedder=FakeEmbedder("fake-a", 16))
    first.sync(TEXTS)
    first.close()
    other = FakeEmbedder("fake-b", 8)
    store = EmbeddingStore(tmp_path, embedder=other)
    stats = store.sync(TEXTS)
    assert (stats.added, stats.kept) == (3, 0)
    assert store.query("views a tensor", k=1)[0][0] == "h-view"
    store.close()


def test_second_writer_is_refused(store: EmbeddingStore) -> None:
    store.sync(TEXTS)
    with open(store.lock_path, "a+") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another writer holds the lock
        with pytest.raises(MemoryStoreError, match="another process"):
            store.sync({**TEXTS, "h-x": "x"})
    assert "h-x" not in store.stored_ids()


def test_real_model_ranks_related_text_first(tmp_path: Path) -> None:
    model = MiniLMEmbedder()
    (vec,) = model.encode(["adds two tensors elementwise"])
    assert len(vec) == 384 and math.isclose(sum(v * v for v in vec), 1.0, rel_tol=1e-4)
    store = EmbeddingStore(tmp_path)
    texts = {
        "h-add": "test that torch.add adds two tensors elementwise with broadcasting",
        "h-save": "test that torch.save writes a checkpoint file to disk and loads it back",
        "h-dist": "test all_reduce across processes in a distributed process group",
    }
    assert store.sync(texts).added == 3
    assert store.query("save a checkpoint to disk", k=3)[0][0] == "h-save"
    assert store.query("collective communication between ranks", k=3)[0][0] == "h-dist"
    assert store.similar("h-add", k=1)[0][0] != "h-add"
    store.close()
