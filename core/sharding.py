"""Split a selection of tests into shards by expected duration; pytest-split's durations file.

The balancing is pytest-split's ``least_duration`` algorithm (longest processing time
first: the slowest test goes to the shard with the smallest sum so far). It keeps the
slowest shard within one test of the ideal, puts one test in each shard before any shard
gets a second (so no shard is empty while there are at least as many runnable tests as
shards), and is deterministic (it orders by node id before it orders by duration, so the
collection order does not change the split). :func:`least_duration` is that algorithm
step for step, without pytest-split's O(tests x shards) bookkeeping (see there).

What we add around it:

- **Skipped tests cost nothing.** They are not balanced; they are dealt round-robin in
  node-id order, so every instance still lands in exactly one shard (the merged results of
  all shards account for the whole selection) and no shard collects all the skip reports.
- **Unknown durations are estimated, never zero:** the median of the known durations of
  the same file (any device: a CPU timing says more than nothing), else the median of all
  known durations, else :data:`DEFAULT_DURATION_S`. Known durations are floored at
  :data:`MIN_DURATION_S`, so a test always weighs something.

The plugin (``--curate-shard``) runs this at collection, where the config's decision for
every item is known; the planner of CI jobs uses :func:`estimate` on file totals. A leg's
plan (:func:`shard_plan`: what its collection saw, what it kept) is what a merge of legs
checks the partition against (``runner/partition.py``).
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testcurator.errors import BadInputError, Location, MissingPathError, Problem
from testcurator.files import atomic_write_text

DEFAULT_DURATION_S = 1.0
MIN_DURATION_S = 0.001
_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class ShardRef:
    """Shard ``index`` (1-based) of ``count``, written ``K/N``."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> ShardRef:
        match = _SHARD.match(text or "")
        if match is None:
            raise BadInputError(f"--shard {text!r}: expected K/N, e.g. 2/8 (shard 2 of 8)")
        index, count = int(match.group(1)), int(match.group(2))
        if count < 1 or not 1 <= index <= count:
            raise BadInputError(f"--shard {text!r}: need 1 <= K <= N (K/N: shard K of N)")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class Shard:
    """One shard of a split: its node ids (in the order given) and expected seconds."""

    index: int
    nodeids: tuple[str, ...]
    expected_s: float
    runnable: int


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def estimate(nodeids: Iterable[str], known: Mapping[str, float]) -> dict[str, float]:
    """Every node id's expected duration (see module docstring)."""
    by_file: dict[str, list[float]] = defaultdict(list)
    for nodeid, seconds in known.items():
        by_file[file_of(nodeid)].append(seconds)
    medians = {file: statistics.median(values) for file, values in by_file.items()}
    fallback = statistics.median(known.values()) if known else DEFAULT_DURATION_S
    out: dict[str, float] = {}
    for nodeid in nodeids:
        seconds = known.get(nodeid)
        if seconds is None:
            seconds = medians.get(file_of(nodeid), fallback)
        out[nodeid] = max(float(seconds), MIN_DURATION_S)
    return out


def slowest_first(files: Sequence[str], known: Mapping[str, float], root: Path | None = None) -> list[str]:
    """``files`` with the files whose slowest known test is slowest first; stable, and a file
    with no known duration goes first (it may be slow). ``known`` is keyed by node ids relative
    to the tree's root; an absolute path is read relative to ``root``.

    Workers idle at the end of a run while the other one finishes its last tests: two threaded
    upstream tests of test_weak.py (6 s each), last in the collection, kept one worker alone
    for 12 s of a corpus draft. Run early, they overlap other work. Whole files move, each
    keeps its own order (upstream's order-dependent tests depend on what ran before them in
    their file). A node id counts as unknown: a list of reruns keeps its order.
    """
    slowest: dict[str, float] = {}
    for nodeid, seconds in known.items():
        file = file_of(nodeid)
        slowest[file] = max(slowest.get(file, 0.0), float(seconds))

    def key(target: str) -> float:
        if "::" in target:
            return math.inf
        path = Path(target)
        if root is not None and path.is_absolute():
            try:
                path = path.relative_to(root)
            except ValueError:
                return math.inf
        return slowest.get(path.as_posix(), math.inf)

    return sorted(files, key=key, reverse=True)


def known_load(files: Sequence[str], known: Mapping[str, float], root: Path | None = None) -> tuple[float, int] | None:
    """(seconds, tests) the known durations of ``files``' tests add up to; None when one of
    them is a node id or a file nothing is known of (its load may be anything)."""
    per_file: dict[str, list[float]] = defaultdict(list)
    for nodeid, seconds in known.items():
        per_file[file_of(nodeid)].append(float(seconds))
    total, tests = 0.0, 0
    for target in files:
        path = Path(target)
        if path.is_absolute():
            if root is None or not path.is_relative_to(root):
                return None
            path = path.relative_to(root)
        found = per_file.get(path.as_posix()) if "::" not in target else None
        if not found:
            return None
        total, tests = total + sum(found), tests + len(found)
    return total, tests


def least_duration(nodeids: Sequence[str], durations: Mapping[str, float], count: int) -> tuple[list[list[int]], list[float]]:
    """pytest-split's ``least_duration``: (indices of ``nodeids`` per shard, their sums).

    The same algorithm, step for step: order by node id, then (stably) by duration, longest
    first; give each test to the shard with the smallest sum (ties: lowest index). Written
    here without pytest-split's per-shard lists of deselected items, which cost O(tests x
    shards): 12.8 million appends for 200,000 tests in 64 shards (bench/shards.py times
    both; tests/core/test_sharding.py checks they split alike).
    """
    order = sorted(range(len(nodeids)), key=nodeids.__getitem__)
    order.sort(key=lambda i: durations[nodeids[i]], reverse=True)  # stable, as pytest-split's
    heap = [(0.0, k) for k in range(count)]
    groups: list[list[int]] = [[] for _ in range(count)]
    sums = [0.0] * count
    for i in order:
        total, k = heapq.heappop(heap)
        total += durations[nodeids[i]]
        groups[k].append(i)
        sums[k] = total
        heapq.heappush(heap, (total, k))
    return groups, sums


def split(
    nodeids: Sequence[str], known: Mapping[str, float], count: int, skipped: Iterable[str] = (),
) -> list[Shard]:
    """``count`` shards of ``nodeids``: runnable tests balanced by duration, skipped ones dealt."""
    if count < 1:
        raise BadInputError(f"cannot split into {count} shards")
    skip = set(skipped)
    runnable = [n for n in nodeids if n not in skip]
    groups, sums = least_duration(runnable, estimate(runnable, known), count)
    members: list[set[str]] = [{runnable[i] for i in g} for g in groups]
    for i, nodeid in enumerate(sorted(skip.intersection(nodeids))):
        members[i % count].add(nodeid)
    order = {n: i for i, n in enumerate(nodeids)}
    return [Shard(k + 1, tuple(sorted(members[k], key=order.__getitem__)), round(sums[k], 6), len(groups[k]))
            for k in range(count)]


def shard_of(nodeids: Sequence[str], known: Mapping[str, float], ref: ShardRef, skipped: Iterable[str] = ()) -> Shard:
    """The one shard ``ref`` names."""
    return split(nodeids, known, ref.count, skipped)[ref.index - 1]


def read_test_durations(path: Path) -> dict[str, float]:
    """A ``.test_durations`` file as node id -> seconds; bad content is a BadInputError."""
    if not path.exists():
        raise MissingPathError(path, "durations file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BadInputError(str(Problem(Location(str(path), exc.lineno, exc.colno), f"invalid JSON: {exc.msg}"))) from exc
    if isinstance(data, list):  # pytest-split < 0.3 wrote [[nodeid, seconds], ...]
        if not all(isinstance(p, list) and len(p) == 2 for p in data):
            raise BadInputError(f"{path}: expected an object {{nodeid: seconds}} or a list of [nodeid, seconds] pairs")
        data = dict(data)
    if not isinstance(data, dict):
        raise BadInputError(f"{path}: expected a JSON object mapping node ids to seconds")
    out: dict[str, float] = {}
    for nodeid, seconds in data.items():
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
            raise BadInputError(f"{path}: {nodeid!r}: expected a duration in seconds >= 0, got {seconds!r}")
        out[str(nodeid)] = float(seconds)
    return out


def format_test_durations(durations: Mapping[str, float]) -> str:
    """pytest-split's format, sorted keys (like pytest-split writes it): equal maps, equal bytes."""
    return json.dumps(dict(sorted(durations.items())), indent=4) + "\n"


def write_test_durations(path: Path, durations: Mapping[str, float]) -> None:
    """Write pytest-split's format, atomically."""
    atomic_write_text(path, format_test_durations(durations))


def collection_digest(nodeids: Iterable[str]) -> str:
    """sha256 of the sorted node ids: the legs of one matrix collected alike when they agree."""
    digest = hashlib.sha256()
    for nodeid in sorted(nodeids):
        digest.update(nodeid.encode() + b"\n")
    return digest.hexdigest()


def shard_plan(ref: ShardRef, nodeids: Sequence[str], shard: Shard, durations_sha256: str | None) -> dict[str, Any]:
    """One leg's plan, as ``--curate-shard-plan`` writes it and the merge reads it.

    Both lists are written in full (sorted): a merge of legs names what no leg kept, which
    needs every collected node id, and this is the only record of the ones a leg left out.
    """
    kept = set(shard.nodeids)
    return {"shard": str(ref), "collected": len(nodeids), "collected_sha256": collection_digest(nodeids),
            "durations_sha256": durations_sha256, "kept": sorted(kept),
            "deselected": sorted(n for n in set(nodeids) if n not in kept)}
