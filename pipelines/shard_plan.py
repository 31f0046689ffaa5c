"""Seed 003's three levels of splitting, as a plan of jobs.

1. **Feature groups**: each test file goes to its area of the test tree (eager ops,
   autograd, inductor, distributed, ...), the same areas the scope stage reasons with
   (``agents/offline/scope.AREAS``); the outermost matching path component wins, so
   ``test/inductor/test_compile_x.py`` is ``inductor``. Unmatched files are ``other``.
2. **Duration cap**: a group whose expected time exceeds ``max_job_s`` gets
   ``ceil(total / max_job_s)`` shards, so no job runs longer than the cap (when durations
   are known and balanced).
3. **Balanced buckets**: inside a group, ``exec --group G --shard K/N`` splits by duration
   at collection (``testcurator.sharding``).

A file's expected time is the sum of the recorded durations of its tests (the durations
store, keyed by node id); a file with none recorded counts as the median of the files
that have some (else :data:`testcurator.sharding.DEFAULT_DURATION_S` per file): run once
with durations recorded before trusting a plan (seed 003's one-pass timing run).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from testcurator.agents.offline.scope import path_facts
from testcurator.errors import BadInputError
from testcurator.sharding import DEFAULT_DURATION_S, ShardRef, file_of

OTHER = "other"


def feature_group(rel: str) -> str:
    """The area of a test file (path relative to the torch root)."""
    areas = path_facts(rel, "file", None).areas
    return areas[0][1].label if areas else OTHER


@dataclass(frozen=True)
class Job:
    group: str
    shard: ShardRef
    files: tuple[str, ...]
    expected_s: float

    def to_json(self) -> dict[str, object]:
        return {"group": self.group, "shard": str(self.shard), "files": len(self.files),
                "expected_s": round(self.expected_s, 1)}


def file_totals(files: Sequence[str], known: Mapping[str, float]) -> dict[str, float]:
    """Expected seconds per file (see module docstring)."""
    sums: dict[str, float] = defaultdict(float)
    for nodeid, seconds in known.items():
        sums[file_of(nodeid)] += seconds
    measured = [sums[f] for f in files if f in sums]
    fallback = statistics.median(measured) if measured else DEFAULT_DURATION_S
    return {f: sums.get(f, fallback) for f in files}


def plan_jobs(files: Sequence[str], known: Mapping[str, float], max_job_s: float) -> list[Job]:
    """One job per (group, shard), groups in name order."""
    if max_job_s <= 0:
        raise BadInputError(f"--max-job-s {max_job_s}: must be positive")
    totals = file_totals(files, known)
    groups: dict[str, list[str]] = defaultdict(list)
    for rel in sorted(files):
        groups[feature_group(rel)].append(rel)
    jobs: list[Job] = []
    for group, members in sorted(groups.items()):
        total = sum(totals[f] for f in members)
        count = max(1, math.ceil(total / max_job_s))
        jobs += [Job(group, ShardRef(k, count), tuple(members), total / count) for k in range(1, count + 1)]
    return jobs


def config_files(config: Path, torch_root: Path | None) -> list[str]:
    """The config's test files, relative to the torch root (as node ids start)."""
    from testcurator.config.loader import load_config

    root = torch_root.resolve() if torch_root else None
    out = []
    for file in load_config(config, torch_root=root).files:
        path = file.resolved_path
        out.append(path.relative_to(root).as_posix() if root and path.is_relative_to(root) else path.as_posix())
    return out


def group_paths(config: Path, torch_root: Path | None, group: str) -> list[str]:
    """Absolute paths of the config's files in feature group ``group`` (``exec --group``)."""
    files = config_files(config, torch_root)
    found = [f for f in files if feature_group(f) == group]
    if not found:
        groups = sorted({feature_group(f) for f in files})
        raise BadInputError(f"--group {group!r}: no file of {config} is in that group (its groups: {', '.join(groups)})")
    root = torch_root.resolve() if torch_root else Path()
    return [str((root / f).resolve()) for f in found]
