"""Per-test embeddings in a chromadb collection under the state directory.

The collection is a cache of vectors keyed by content hash: a test whose text did not
change keeps its id and is never re-embedded, and a directory that will not open is moved
aside and rebuilt (the next sync recomputes what it held). We always pass our own vectors
and ``embedding_function=None``: otherwise chromadb falls back to a default embedding
function that downloads a model from the internet.

chromadb's embedded client is not process-safe (concurrent writers lose vectors silently),
so writes take an exclusive lock file; a second writer gets a clear error instead.

What each hash's vector is of, :func:`embedding_texts`, is read from the memory store
(``store.py``); this module imports nothing else of memory.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from testcurator.errors import BadInputError, MemoryStoreError

if TYPE_CHECKING:
    from testcurator.memory.store import MemoryStore

COLLECTION = "tests"
ADD_BATCH = 512  # well under chromadb's 5461-per-add limit; also the progress granularity
DEFAULT_EMBEDDER = "minilm"


class Embedder(Protocol):
    """Turns texts into vectors; ``name`` identifies the vector space."""

    name: str

    def encode(self, texts: Sequence[str]) -> list[list[float]]: ...


def _minilm() -> Embedder:
    from testcurator.memory.minilm import MiniLMEmbedder  # its model runs in a child process

    return MiniLMEmbedder()


# Explicit registry: which embedders exist, by the name a caller (or config) uses.
EMBEDDERS: dict[str, Callable[[], Embedder]] = {"minilm": _minilm}


def get_embedder(name: str = DEFAULT_EMBEDDER) -> Embedder:
    try:
        return EMBEDDERS[name]()
    except KeyError:
        raise BadInputError(f"unknown embedder {name!r}; known: {sorted(EMBEDDERS)}") from None


def embedding_texts(store: MemoryStore) -> dict[str, str]:
    """content hash -> text to embed: the summary of the first test (by name) with that hash.

    Here, beside the vectors it feeds, so that a build (builder.py) and a re-embed after the
    summaries changed (summaries.py :func:`~testcurator.memory.summaries.reembed`) embed the
    same texts from the store without either importing the other.
    """
    texts: dict[str, str] = {}
    for content_hash, _generic, summary in store.iter_hash_texts():
        texts.setdefault(content_hash, summary)
    return texts


@dataclass(frozen=True)
class SyncStats:
    added: int
    removed: int
    kept: int
    seconds: float


class EmbeddingStore:
    """Vectors of test texts, keyed by content hash, in ``state_dir / "chroma"``."""

    def __init__(self, state_dir: Path, embedder: Embedder | None = None) -> None:
        self.state_dir = Path(state_dir)
        self.path = (self.state_dir / "chroma").absolute()
        self.aside_path = self.path.with_name("chroma.broken")
        self.lock_path = self.path.with_name("chroma.lock")
        self.embedder = embedder if embedder is not None else get_embedder()
        self._owns_embedder = embedder is None  # closed with the store (MiniLM's child process)
        self._client: Any = None
        self._collection: Any = None

    # -- opening -------------------------------------------------------------
    @property
    def collection(self) -> Any:
        if self._collection is None:
            self._open_or_rebuild()
        return self._collection

    def _open_or_rebuild(self) -> None:
        try:
            self._open()
        except Exception as exc:  # chromadb raises many kinds; any of them means "rebuild"
            self._forget_client()
            with self._write_lock():
                self._move_aside()
            warnings.warn(
                f"embedding cache {self.path} could not be opened ({type(exc).__name__}: {exc}); "
                f"moved it to {self.aside_path} and started an empty one: the next sync "
                "re-embeds every test",
                RuntimeWarning,
                stacklevel=3,
            )
            self._open()

    def _open(self) -> None:
        import chromadb
        from chromadb.config import Settings

        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._client = chromadb.PersistentClient(
            path=str(self.path), settings=Settings(anonymized_telemetry=False)
        )
        collection = self._client.get_or_create_collection(
            COLLECTION, embedding_function=None, metadata=self._metadata()
        )
        if (collection.metadata or {}).get("embedder") != self.embedder.name:
            # Vectors from another model live in another space: drop them, they are a cache.
            self._client.delete_collection(COLLECTION)
            collection = self._client.create_collection(
                COLLECTION, embedding_function=None, metadata=self._metadata()
            )
        collection.count()  # probe: a broken directory can open and fail on first read
        self._collection = collection

    def _metadata(self) -> dict[str, str]:
        return {"hnsw:space": "cosine", "embedder": self.embedder.name}

    def _forget_client(self) -> None:
        # chromadb 1.5 caches a System per path even when its start failed; without
        # evicting it, reopening the rebuilt directory reuses the dead one.
        from chromadb.api.shared_system_client import SharedSystemClient

        SharedSystemClient._identifier_to_system.pop(str(self.path), None)
        SharedSystemClient._identifier_to_refcount.pop(str(self.path), None)
        self._client = self._collection = None

    def _move_aside(self) -> None:
        if self.aside_path.is_dir():
            shutil.rmtree(self.aside_path)
        elif self.aside_path.exists():
            self.aside_path.unlink()
        if self.path.exists():
            os.replace(self.path, self.aside_path)

    @contextmanager
    def _write_lock(self) -> Iterator[None]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise MemoryStoreError(
                    f"{self.path} is being written by another process (lock {self.lock_path}); "
                    "hint: chromadb allows one writer, wait for it to finish"
                ) from None
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = self._collection = None
        close_embedder = getattr(self.embedder, "close", None) if self._owns_embedder else None
        if close_embedder is not None:
            close_embedder()

    # -- writing -------------------------------------------------------------
    def stored_ids(self) -> set[str]:
        return set(self.collection.get(include=[])["ids"])

    def sync(
        self,
        texts: Mapping[str, str],
        progress: Callable[[int, int], None] | None = None,
    ) -> SyncStats:
        """Make the collection hold exactly ``texts`` (content hash -> text).

        Only hashes not stored yet are embedded; stored hashes absent from ``texts`` are
        deleted. ``progress(done, total)`` is called after each embedded batch.
        """
        start = time.perf_counter()
        collection = self.collection
        with self._write_lock():
            stored = self.stored_ids()
            new = sorted(set(texts) - stored)
            gone = sorted(stored - set(texts))
            for chunk in _chunks(gone, ADD_BATCH):
                collection.delete(ids=chunk)
            done = 0
            for chunk in _chunks(new, ADD_BATCH):
                vectors = self.embedder.encode([texts[h] for h in chunk])
                collection.add(ids=chunk, embeddings=vectors)
                done += len(chunk)
                if progress is not None:
                    progress(done, len(new))
        kept = len(stored) - len(gone)
        return SyncStats(len(new), len(gone), kept, time.perf_counter() - start)

    # -- reading -------------------------------------------------------------
    def query(self, text: str, k: int = 10) -> list[tuple[str, float]]:
        """The ``k`` stored hashes nearest to ``text``: (hash, cosine distance), best first."""
        (vector,) = self.embedder.encode([text])
        return self._nearest(vector, k)

    def similar(self, content_hash: str, k: int = 10) -> list[tuple[str, float]]:
        """The ``k`` stored hashes nearest to a stored one, itself excluded."""
        got = self.collection.get(ids=[content_hash], include=["embeddings"])
        if not got["ids"]:
            raise BadInputError(f"no embedding stored for {content_hash!r} in {self.path}")
        hits = self._nearest(list(got["embeddings"][0]), k + 1)
        return [hit for hit in hits if hit[0] != content_hash][:k]

    def _nearest(self, vector: Sequence[float], k: int) -> list[tuple[str, float]]:
        count = self.collection.count()
        if count == 0 or k <= 0:
            return []
        result = self.collection.query(
            query_embeddings=[list(vector)], n_results=min(k, count), include=["distances"]
        )
        # Float error can make a self-distance -1e-7; distances are >= 0 by definition.
        return list(zip(result["ids"][0], (max(0.0, float(d)) for d in result["distances"][0])))


def _chunks(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield list(items[i : i + size])
