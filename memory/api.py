"""The Python API agents use to read memory; the ``memory`` CLI is a thin layer over it.

    from testcurator.memory.api import Memory
    from testcurator.memory.builder import build
    build("/src/pytorch", state_dir=".testcurator")          # or: testcurator memory build
    with Memory.open(".testcurator") as mem:
        mem.test("TestViewOps::test_contiguous_self")         # -> [StoredTest, ...]
        for hit in mem.query("broadcasting of views", k=5):   # semantic, via embeddings
            print(hit.distance, [t.generic for t in hit.tests])

Semantic results are per content hash (tests sharing a body, e.g. one test inherited by
several classes, share one embedding), so a :class:`Hit` carries every test with that hash.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testcurator.errors import BadInputError, MemoryStoreError
from testcurator.memory.collect import estimate_instances
from testcurator.memory.paths import memory_db_path, resolve_state_dir
from testcurator.memory.store import FileState, MemoryStore, StoredTest
from testcurator.names import KNOWN_DEVICES
from testcurator.vocab import TestKey

@dataclass(frozen=True)
class Hit:
    """One semantic match: a content hash, its distance (lower is closer), its tests."""

    content_hash: str
    distance: float
    tests: tuple[StoredTest, ...]


class Memory:
    """Read access to a built memory (plus LLM-written summaries)."""

    def __init__(self, state_dir: Path, store: MemoryStore) -> None:
        self.state_dir = state_dir
        self.store = store
        self._embeddings: Any = None

    @classmethod
    def open(cls, state_dir: Path | str | None = None) -> Memory:
        """Open the memory under ``state_dir`` (resolved as every command does)."""
        state = resolve_state_dir(state_dir)
        return cls(state, MemoryStore.open(memory_db_path(state), create=False))

    def close(self) -> None:
        if self._embeddings is not None:
            self._embeddings.close()
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def torch_root(self) -> Path | None:
        root = self.store.get_meta("torch_root")
        return Path(root) if root else None

    # -- the index -------------------------------------------------------------------------

    def tests(self) -> list[StoredTest]:
        return self.store.tests()

    def test(self, name: str) -> list[StoredTest]:
        """Tests named ``Class::test``, ``path::Class::test``, ``path::test`` or ``test``."""
        key = TestKey.parse(name)
        if key.test and (key.file.endswith(".py") or key.cls):
            return self.store.tests("t.path = ? AND t.generic = ?", (self._rel(key.file), key.name))
        return self.store.tests("t.generic = ?", (name,))

    def require_test(self, name: str) -> list[StoredTest]:
        """Like :meth:`test`, but an unknown name is a :class:`BadInputError` with suggestions."""
        found = self.test(name)
        if found:
            return found
        known = sorted({t.generic for t in self.tests()})
        key = TestKey.parse(name)
        close = difflib.get_close_matches(key.name if key.file.endswith(".py") else name, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise BadInputError(f"no test named {name!r} in memory at {self.state_dir}{hint}")

    def tests_in_file(self, path: Path | str) -> list[StoredTest]:
        return self.store.tests("t.path = ?", (self._rel(path),))

    def tests_by_hash(self, hashes: Iterable[str]) -> dict[str, list[StoredTest]]:
        wanted = list(dict.fromkeys(hashes))
        out: dict[str, list[StoredTest]] = {h: [] for h in wanted}
        for i in range(0, len(wanted), 500):  # stay under SQLite's variable limit
            chunk = wanted[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for t in self.store.tests(f"t.content_hash IN ({marks})", tuple(chunk)):
                out[t.content_hash].append(t)
        return out

    def file_records(self) -> list[FileState]:
        return sorted(self.store.file_states().values(), key=lambda s: s.path)

    def instantiations(self, path: Path | str) -> list[dict[str, Any]]:
        return self.store.instantiations(self._rel(path))

    def class_bases(self, path: Path | str, cls: str) -> tuple[str, ...] | None:
        return self.store.class_bases(self._rel(path), cls)

    def instances_on(self, test: StoredTest, device: str = "cpu") -> int | None:
        """Estimated instances of ``test`` on ``device`` (None: not statically known).

        0 when the class's ``instantiate_device_type_tests(only_for=/except_for=)`` leaves
        the device out; otherwise the estimate from the decorators that apply on ``device``
        (``@dtypesIfCPU`` on CPU only, ``@dtypesIfPRIVATEUSE1`` on an out-of-tree backend).
        """
        if not test.device_generic:
            return test.instances_estimate
        for inst in self.instantiations(test.path):
            if inst["cls"] != test.cls or inst["kind"] != "device":
                continue
            for key, keep_if_listed in (("only_for", True), ("except_for", False)):
                listed = inst[key]
                if listed is None:
                    continue
                if not set(listed) <= set(KNOWN_DEVICES):
                    return None  # an expression, not a literal list of devices
                if (device in listed) != keep_if_listed:
                    return 0
        return estimate_instances(test.decorators, True, test.parametrized, device)

    def set_summary(self, content_hash: str, text: str, author: str = "llm") -> None:
        """Store a summary written elsewhere (an LLM brain); it replaces the offline one.

        The embedding of that hash is not recomputed until its content changes or the
        embedding cache is rebuilt (vectors are keyed by content hash).
        """
        self.store.set_summary(content_hash, text, author)

    def drop_summaries(self, content_hashes: Iterable[str]) -> int:
        """Forget summaries written through :meth:`set_summary` (the offline one shows again)."""
        return self.store.drop_summaries(content_hashes)

    def _rel(self, path: Path | str) -> str:
        p = Path(path)
        root = self.torch_root
        if p.is_absolute() and root is not None:
            try:
                return p.resolve().relative_to(root).as_posix()
            except ValueError:
                return p.as_posix()
        return p.as_posix()

    # -- semantics -------------------------------------------------------------------------

    def _embedding_store(self) -> Any:
        if self._embeddings is None:
            if not (self.state_dir / "chroma").exists():
                raise MemoryStoreError(
                    f"no embeddings under {self.state_dir}; run `testcurator memory build` without --no-embed")
            from testcurator.memory.embeddings import EmbeddingStore

            self._embeddings = EmbeddingStore(self.state_dir)
        return self._embeddings

    def _hits(self, pairs: list[tuple[str, float]]) -> list[Hit]:
        by_hash = self.tests_by_hash(h for h, _ in pairs)
        # A hash with no test left (embeddings older than the index) is dropped, not shown.
        return [Hit(h, d, tuple(by_hash[h])) for h, d in pairs if by_hash.get(h)]

    def query(self, text: str, k: int = 10) -> list[Hit]:
        """The ``k`` test contents nearest in meaning to ``text``."""
        if not text.strip():
            raise BadInputError("query text is empty")
        if k <= 0:
            raise BadInputError(f"k must be positive, got {k}")
        return self._hits(self._embedding_store().query(text, k))

    def similar(self, name: str, k: int = 10) -> list[Hit]:
        """The ``k`` test contents nearest to test ``name`` (itself excluded)."""
        target = self.require_test(name)[0]
        return self._hits(self._embedding_store().similar(target.content_hash, k))

    def collected_instances(self, generic: str, path: str | None = None) -> dict[str, list[str]]:
        """Exact instances per device from collection/capture records; {} before any."""
        from testcurator.memory.opmap import OpMap

        opmap = OpMap(self.state_dir)
        return opmap.instances(generic, path) if opmap.exists() else {}

    def ops_for_test(self, generic: str) -> list[Any] | None:
        """Aten ops captured for ``generic`` (H3b's op map), or None if no op map was built."""
        from testcurator.memory.opmap import OPS_DB, OpMap

        if not (self.state_dir / OPS_DB).exists():
            return None
        opmap = OpMap(self.state_dir)
        try:
            return list(opmap.ops_for_test(generic))
        finally:
            opmap.close()
