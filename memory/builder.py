"""Build (or incrementally refresh) memory: discover files -> index -> store -> embed.

Incremental by file: each file's mtime, size and sha256 are stored. A file whose mtime and
size are unchanged is not even read; one whose bytes hash the same is only re-stamped;
only the others are parsed again. Embeddings are keyed by content hash, so after a change
only tests whose hash is new get embedded. The build defines the indexed set: a file that
is no longer matched (deleted upstream, or outside new ``--files``) is removed.

A file that cannot be read or parsed is recorded with its error (``status='error'``, no
tests, as pytest would collect none) and the build goes on.
"""

from __future__ import annotations

import glob
import hashlib
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from testcurator.errors import BadInputError, MissingPathError
from testcurator.memory.collect import FileIndex, IndexedTest
from testcurator.memory.index import make_parser, parse_source
from testcurator.memory.paths import memory_db_path, resolve_state_dir
from testcurator.memory.store import FileState, MemoryStore
from testcurator.memory.summaries import offline_summary

Progress = Callable[[str, int, int], None]  # (phase "index"|"embed", done, total)
DEFAULT_TEST_GLOB = "test_*.py"
_BATCH = 200  # files per transaction: a killed build keeps what it finished
_PARALLEL_MIN_FILES = 64
_GLOB_CHARS = set("*?[")


@dataclass
class BuildStats:
    files_total: int = 0
    files_parsed: int = 0
    files_unchanged: int = 0
    files_failed: int = 0
    files_removed: int = 0
    tests_total: int = 0
    tests_parsed: int = 0  # tests in the files parsed this time
    bytes_parsed: int = 0
    seconds_index: float = 0.0
    seconds_embed: float = 0.0
    embed: Any = None  # embeddings.SyncStats, or None with --no-embed
    failures: list[tuple[str, str]] = field(default_factory=list)  # (path, error)


def default_globs(torch_root: Path) -> list[str]:
    """``test/**/test_*.py`` in a PyTorch checkout, else ``**/test_*.py`` under the root."""
    if (torch_root / "test").is_dir():
        return [f"test/**/{DEFAULT_TEST_GLOB}"]
    return [f"**/{DEFAULT_TEST_GLOB}"]


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.resolve().as_posix()  # named explicitly outside the root: keep it absolute


def _explicit(root: Path, pattern: str) -> list[Path]:
    path = Path(pattern) if Path(pattern).is_absolute() else root / pattern
    if not path.exists():
        raise MissingPathError(path, "test file")
    if path.is_dir():
        return sorted(p for p in path.rglob(DEFAULT_TEST_GLOB) if p.is_file())
    if path.suffix != ".py":
        raise BadInputError(f"{path}: not a Python file; memory indexes .py test files")
    return [path]


def discover(torch_root: Path, patterns: Sequence[str] | None = None) -> list[tuple[Path, str]]:
    """(absolute path, path relative to the root) of every file to index, sorted."""
    if not torch_root.exists():
        raise MissingPathError(torch_root, "torch root")
    if not torch_root.is_dir():
        raise BadInputError(f"torch root {torch_root} is not a directory")
    patterns = list(patterns) if patterns else default_globs(torch_root)
    found: dict[str, Path] = {}
    for pattern in patterns:
        if not _GLOB_CHARS & set(pattern):
            paths = _explicit(torch_root, pattern)
        else:
            base = pattern if Path(pattern).is_absolute() else str(torch_root / pattern)
            paths = [Path(p) for p in glob.glob(base, recursive=True)]
        for path in paths:
            if path.suffix == ".py" and path.is_file() and "__pycache__" not in path.parts:
                found.setdefault(_rel(path, torch_root), path)
    if not found:
        raise BadInputError(f"no Python test files under {torch_root} match {', '.join(patterns)}")
    return [(found[rel], rel) for rel in sorted(found)]


def index_bytes(data: bytes, rel: str, parser: Any = None) -> FileIndex:
    """Index one file's bytes; undecodable text becomes a recorded error."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return FileIndex(path=rel, error=f"not UTF-8 text (byte {exc.start})")
    return parse_source(data, rel, parser)


_Item = tuple[FileState, Optional[FileIndex], list[tuple[IndexedTest, str]]]
_Job = tuple[str, bytes]  # (relative path, content) to index


def _index_job(job: _Job) -> tuple[FileIndex, list[str]]:
    """Worker: index one file and summarise its tests (module level: picklable)."""
    rel, data = job
    index = index_bytes(data, rel, _parser())
    return index, [offline_summary(rec, rel) for rec in index.tests]


@lru_cache(maxsize=1)
def _parser() -> Any:
    return make_parser()  # one per process: workers reuse theirs across files


def _jobs_for(requested: int | None, pending: int) -> int:
    if requested is not None:
        return max(1, requested)
    # Processes pay off only for real work; small (warm, unit-test) builds stay serial.
    return 1 if pending < _PARALLEL_MIN_FILES else max(1, min(os.cpu_count() or 1, 4))


def _parsed(jobs: list[_Job], workers: int) -> Iterator[tuple[FileIndex, list[str]]]:
    if workers <= 1:
        yield from map(_index_job, jobs)
        return
    # spawn, not fork: the CLI runs a progress-bar thread, and forking a threaded
    # process can deadlock the child.
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        yield from pool.map(_index_job, jobs, chunksize=8)


def _refresh(store: MemoryStore, files: list[tuple[Path, str]], stats: BuildStats,
             progress: Progress | None, workers: int | None) -> None:
    old = store.file_states()
    batch: list[_Item] = []
    jobs: list[_Job] = []
    stamps: list[tuple[int, int, str]] = []
    done = 0
    for path, rel in files:  # cheap pass: stat, maybe hash; collect what must be parsed
        queued = len(jobs)
        item = _check_one(path, rel, old.get(rel), stats, jobs, stamps)
        if item is not None:
            batch.append(item)
        if len(jobs) == queued:  # settled without parsing
            done += 1
            if progress is not None:
                progress("index", done, len(files))
    store.replace_files(batch)
    batch = []
    for (rel, data), (mtime_ns, size, sha), (index, summaries) in zip(
            jobs, stamps, _parsed(jobs, _jobs_for(workers, len(jobs)))):
        tests = list(zip(index.tests, summaries))
        stats.files_parsed += 1
        stats.bytes_parsed += len(data)
        stats.tests_parsed += len(tests)
        state = FileState(rel, mtime_ns, size, sha, "error" if index.error else "ok",
                          index.error, index.warnings, len(tests))
        batch.append((state, index, tests))
        if len(batch) >= _BATCH:
            store.replace_files(batch)
            batch = []
        done += 1
        if progress is not None:
            progress("index", done, len(files))
    store.replace_files(batch)
    gone = sorted(set(old) - {rel for _, rel in files})
    store.remove_files(gone)
    stats.files_removed = len(gone)


def _check_one(path: Path, rel: str, prev: FileState | None, stats: BuildStats,
               jobs: list[_Job], stamps: list[tuple[int, int, str]]) -> _Item | None:
    """Unchanged: None. Touched or unreadable: a state-only item. Changed: queued in jobs."""
    try:
        st = path.stat()
        if prev is not None and (prev.mtime_ns, prev.size) == (st.st_mtime_ns, st.st_size):
            stats.files_unchanged += 1
            return None
        data = path.read_bytes()
    except OSError as exc:
        state = FileState(rel, 0, -1, "", "error", f"cannot read: {exc}")
        return state, FileIndex(path=rel, error=state.error), []
    sha = hashlib.sha256(data).hexdigest()
    if prev is not None and prev.sha256 == sha:
        stats.files_unchanged += 1  # touched, not changed: re-stamp only
        return replace(prev, mtime_ns=st.st_mtime_ns, size=st.st_size), None, []
    jobs.append((rel, data))
    stamps.append((st.st_mtime_ns, st.st_size, sha))
    return None


def build(
    torch_root: Path | str,
    files: Sequence[str] | None = None,
    state_dir: Path | str | None = None,
    *,
    progress: Progress | None = None,
    embed: bool = True,
    rebuild: bool = False,
    jobs: int | None = None,
) -> BuildStats:
    """Index ``torch_root`` into the memory under ``state_dir``; see the module docstring."""
    root = Path(torch_root).expanduser()
    listed = discover(root, files)  # before touching the store: bad input changes nothing
    state = resolve_state_dir(state_dir)
    db = memory_db_path(state)
    if rebuild:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(str(db) + suffix).unlink(missing_ok=True)
    stats = BuildStats(files_total=len(listed))
    start = time.perf_counter()
    with MemoryStore.open(db) as store:
        _refresh(store, listed, stats, progress, jobs)
        store.set_meta("torch_root", str(root.resolve()))
        store.set_meta("built_at", str(time.time()))
        store.prune_summaries()
        stats.tests_total = store.counts()["tests"]
        # Failures of earlier builds still stand while their file is unchanged: report all.
        stats.failures = sorted((p, s.error or "") for p, s in store.file_states().items() if s.status != "ok")
        stats.files_failed = len(stats.failures)
        stats.seconds_index = time.perf_counter() - start
        if stats.tests_total == 0:
            raise BadInputError(f"no tests found in {len(listed)} file(s) under {root}")
        if embed:
            from testcurator.memory.embeddings import EmbeddingStore, embedding_texts

            emb_progress = (lambda d, t: progress("embed", d, t)) if progress is not None else None
            embeddings = EmbeddingStore(state)
            try:
                stats.embed = embeddings.sync(embedding_texts(store), progress=emb_progress)
            finally:
                embeddings.close()
            stats.seconds_embed = stats.embed.seconds
    return stats
