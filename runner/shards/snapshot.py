"""The durations a shard matrix splits by, frozen once and read by every leg.

Every ``exec --shard K/N`` leg records the durations it measures in the state directory's
store. Had each leg split by the store as it found it, legs run one after another in one
state directory (a self-hosted runner) would each split differently: some instances ran in
two legs, others in none (issue 22). So a leg splits by a *snapshot*:
``<state-dir>/shard-snapshots/<key>.json`` (pytest-split's ``.test_durations`` format),
taken from the store by the first leg (or ``shards plan``) that needs it and read unchanged
by every later one; the split is then a function of the snapshot, the collection and N.

The key is a digest of what picks a matrix's durations: the config's content
(``manifest.config_hash``; a draft run: its resolved test paths), the device the durations
are for, and the content of a ``--durations`` file. A changed config or durations file
therefore starts a new snapshot by itself. ``--refresh-snapshot`` takes a new one from the
store now: give it to ``shards plan``, or to the first leg of a matrix only (a leg in the
middle would split unlike the legs before it). Deleting the folder refreshes every key.

A snapshot is created first-writer-wins (a hard link to a complete temporary file), so
legs that start at the same moment on one state directory still read one snapshot.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from testcurator.files import atomic_write_text, current_umask
from testcurator.runner.shards.durations import DurationStore
from testcurator.runner.manifest import config_hash
from testcurator.sharding import format_test_durations, read_test_durations

SNAPSHOT_DIR = "shard-snapshots"
_KEY_VERSION = b"shard-snapshot-1"  # bump when what the key covers changes


@dataclass(frozen=True)
class Snapshot:
    """A frozen durations file; ``taken``: this call wrote it (else it was there already)."""

    path: Path
    taken: bool


def snapshot_key(config: Path | None, paths: Sequence[str], device: str | None, durations: Path | None) -> str:
    """The digest that names a matrix's snapshot (see module docstring)."""
    digest = hashlib.sha256(_KEY_VERSION + b"\0")
    if config is not None:
        digest.update(b"config\0" + (config_hash(config) or "").encode() + b"\0")
    else:  # a draft run: what it runs is its paths, wherever the user stood
        for target in sorted(_resolved(p) for p in paths):
            digest.update(b"path\0" + target.encode() + b"\0")
    digest.update(b"device\0" + (device or "").encode() + b"\0")
    if durations is not None:
        digest.update(b"durations\0" + hashlib.sha256(durations.read_bytes()).hexdigest().encode() + b"\0")
    return digest.hexdigest()[:20]


def _resolved(target: str) -> str:
    path, sep, rest = target.partition("::")
    return str(Path(path).resolve()) + sep + rest if Path(path).exists() else target


def snapshot_path(state_dir: Path, key: str) -> Path:
    return state_dir / SNAPSHOT_DIR / f"{key}.json"


def current_durations(store: DurationStore, device: str | None, durations: Path | None) -> dict[str, float]:
    """What a new snapshot holds: the store's durations for ``device``, a ``--durations``
    file's (non-zero) timings over them (as exec and ``shards plan`` always merged them)."""
    known = store.known_for(device)
    if durations is not None:
        known.update({nodeid: s for nodeid, s in read_test_durations(durations).items() if s > 0})
    return known


def freeze(state_dir: Path, key: str, take: Callable[[], Mapping[str, float]], *, refresh: bool = False) -> Snapshot:
    """The snapshot ``key`` under ``state_dir``: the one there, else (or with ``refresh``)
    a new one of what ``take()`` returns."""
    path = snapshot_path(state_dir, key)
    if path.is_file() and not refresh:
        return Snapshot(path, taken=False)
    text = format_test_durations(take())
    if refresh:
        atomic_write_text(path, text)  # replaces it: the caller asked for a new one
        return Snapshot(path, taken=True)
    return Snapshot(path, taken=_create(path, text))


def _create(path: Path, text: str) -> bool:
    """Write ``path`` unless it exists (then keep the other writer's: False)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes it 0600: give it a plain file's mode
        try:
            os.link(tmp, path)  # atomic, and fails when another leg linked its snapshot first
        except FileExistsError:
            return False
        except OSError:  # a filesystem without hard links: rename (a race then lets the last one win)
            if path.exists():
                return False
            os.replace(tmp, path)
        return True
    finally:
        Path(tmp).unlink(missing_ok=True)
