"""Merge the output folders of many shards (or runs) into one, losslessly.

A *run folder* is what :func:`testcurator.runner.execute.execute` writes: ``results.jsonl``,
``junit.xml``, ``manifest.json`` and ``work/``. Merging reads every folder's
``results.jsonl`` (the complete records; the JUnit XML is derived from them), folds a node
id seen in several folders as successive attempts (``ingest.merge_attempts``: shards are
disjoint, so that only happens when a shard was rerun), and writes the three files again
for the whole. The merged manifest keeps every shard's own manifest summary (host, shard,
wall time, counts, pytest commands, the plan without its lists) beside the union of the
per-test results. Legs of a shard matrix must partition what they collected: a merge that
finds an instance in two legs, or in none, writes nothing and raises (exit 3;
``runner/partition.py``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from testcurator.errors import BadInputError
from testcurator.runner.results.ingest import merge_attempts
from testcurator.runner.results.junit_write import write_junit
from testcurator.runner.manifest import MANIFEST_VERSION, write_manifest
from testcurator.runner.partition import PLAN_KEY, check_partition, plan_summary
from testcurator.runner.results.records import TestRecord, counts, read_jsonl, write_jsonl

RESULTS, MANIFEST = "results.jsonl", "manifest.json"
# Fields that describe one process's environment: kept per shard, and at the top when all agree.
_PER_SHARD = ("command", "cwd", "started", "finished", "wall_s", "selection", "missing_files", "options", "host")
_SHARED = ("config", "config_hash", "torch_root", "upstream", "torch", "backend", "python", "os", "cpu", "ci")


def is_run_dir(path: Path) -> bool:
    return (path / RESULTS).is_file() and (path / MANIFEST).is_file()


def read_manifest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BadInputError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from exc
    if not isinstance(data, dict) or "tests" not in data:
        raise BadInputError(f"{path}: not a testcurator manifest (no 'tests')")
    return data


def _shard_summary(manifest: dict[str, Any], source: str) -> dict[str, Any]:
    summary = {key: manifest.get(key) for key in _PER_SHARD if key in manifest}
    summary["source"] = source
    summary["counts"] = manifest.get("counts")
    summary["pytest_commands"] = manifest.get("pytest_commands", [])
    if isinstance(manifest.get(PLAN_KEY), dict):
        summary[PLAN_KEY] = plan_summary(manifest[PLAN_KEY])
    for nested in manifest.get("shards", []):  # merging merged manifests keeps the leaves
        summary.setdefault("shards", []).append(nested)
    return summary


def merge_manifests(manifests: Sequence[tuple[str, dict[str, Any]]], records: Sequence[TestRecord]) -> dict[str, Any]:
    """One manifest for ``records``, from ``(source, manifest)`` pairs."""
    merged: dict[str, Any] = {"manifest_version": MANIFEST_VERSION, "merged_from": len(manifests)}
    for key in _SHARED:
        values = [m.get(key) for _, m in manifests if key in m]
        if values and all(v == values[0] for v in values):
            merged[key] = values[0]
    starts = [m["started"] for _, m in manifests if m.get("started")]
    ends = [m["finished"] for _, m in manifests if m.get("finished")]
    merged["started"], merged["finished"] = (min(starts) if starts else None), (max(ends) if ends else None)
    merged["shards"] = [_shard_summary(m, source) for source, m in manifests]
    merged["counts"] = counts(records)
    merged["tests"] = {r.nodeid: {"outcome": r.outcome, "duration": round(r.duration, 6),
                                  **({"failure_class": r.failure_class} if r.failure_class else {}),
                                  **({"flaky": True} if r.flaky else {})} for r in records}
    return merged


def merge_run_dirs(dirs: Sequence[Path], out: Path) -> list[TestRecord]:
    """Merge run folders into ``out`` (results.jsonl, junit.xml, manifest.json)."""
    for path in dirs:
        if not is_run_dir(path):
            raise BadInputError(f"{path}: not a run folder (needs {RESULTS} and {MANIFEST})")
    records = merge_attempts([r for path in dirs for r in read_jsonl(path / RESULTS)])
    write_outputs(out, records, [(str(path), read_manifest(path / MANIFEST)) for path in dirs])
    return records


def run_manifests(paths: Sequence[Path]) -> list[tuple[str, dict[str, Any]]]:
    """The manifests of the run folders among ``paths`` (as ``ingest.result_files`` finds them)."""
    from testcurator.runner.results.ingest import result_files

    return [(str(f.parent), read_manifest(f.parent / MANIFEST)) for f in result_files(paths)
            if f.name == RESULTS and (f.parent / MANIFEST).is_file()]


def write_outputs(out: Path, records: Sequence[TestRecord], manifests: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """The merged files; nothing at all when the legs among ``manifests`` do not partition
    their selection (:func:`check_partition` raises, exit 3)."""
    check_partition(manifests)
    write_jsonl(out / RESULTS, records)
    write_junit(out / "junit.xml", records)
    if manifests:
        write_manifest(out / MANIFEST, merge_manifests(manifests, records))
