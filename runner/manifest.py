"""The reproducibility manifest of one run (``manifest.json``).

What a reader needs to rerun or compare a run: the command and each pytest argv, a
config hash (sha256 over the config files' bytes, files in sorted path order, each
preceded by its name relative to the config root so a rename changes the hash), the
upstream tree's git revision when ``torch_root`` is a checkout (plus whether it is dirty),
torch's version, git revision and CUDA version, the backend (module, device, version when
installed as a distribution), the host, Python, OS, CPU model, the shard (a leg's plan
too: ``runner/partition.py``), every test's outcome and duration, and in CI the three SHAs
and the dispatch payload (``runner/provenance.py``).

Torch's version is read from its files without importing it (``import torch`` costs
seconds and the runner itself does not need torch); the subprocesses use the same
interpreter, so it is the torch that ran.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from testcurator.files import atomic_write_text
from testcurator.installed import version_fields
from testcurator.runner.command import RunSpec, Selection
from testcurator.runner.partition import PLAN_KEY, read_plan
from testcurator.runner.provenance import ci_provenance
from testcurator.runner.results.records import TestRecord, counts

MANIFEST_VERSION = 1


def config_hash(config: Path | None) -> str | None:
    if config is None:
        return None
    from testcurator.config.loader import config_files

    root = config if config.is_dir() else config.parent
    digest = hashlib.sha256()
    for file in sorted(config_files(config)):
        digest.update(str(file.relative_to(root)).encode() + b"\0")
        digest.update(file.read_bytes() + b"\0")
    return digest.hexdigest()


def git_revision(root: Path | None) -> dict[str, Any] | None:
    """``{"revision", "dirty"}`` when ``root`` is inside a git checkout, else None."""
    if root is None or not root.exists():
        return None
    try:
        rev = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30)
        if rev.returncode != 0:
            return None
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {"revision": rev.stdout.strip(), "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}


def cpu_model() -> str | None:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    return platform.processor() or None


def backend_info(spec: RunSpec) -> dict[str, Any]:
    info: dict[str, Any] = {"module": spec.backend, "device": spec.device, "version": None}
    if spec.backend:
        top = Path(spec.backend).stem if Path(spec.backend).exists() else spec.backend.split(".")[0]
        try:
            info["version"] = importlib.metadata.version(top)
        except importlib.metadata.PackageNotFoundError:
            info["version"] = None
    return info


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat()


def build_manifest(
    spec: RunSpec, selection: Selection, records: Sequence[TestRecord], pytest_commands: list[list[str]],
    started: float, finished: float,
) -> dict[str, Any]:
    return {
        "manifest_version": MANIFEST_VERSION,
        "command": list(spec.command),
        "pytest_commands": pytest_commands,
        "cwd": str(spec.cwd),
        "started": _iso(started), "finished": _iso(finished), "wall_s": round(finished - started, 3),
        "config": str(spec.config) if spec.config else None,
        "config_hash": config_hash(spec.config),
        "torch_root": str(spec.torch_root.resolve()) if spec.torch_root else None,
        "upstream": git_revision(spec.torch_root),
        "selection": list(selection.targets), "missing_files": list(selection.missing),
        "options": {"workers": spec.workers, "timeout": spec.timeout, "retries": spec.retries, "shard": spec.shard,
                    **({"durations": str(spec.durations)} if spec.durations is not None else {})},
        "host": platform.node(),
        "torch": version_fields(),
        "backend": backend_info(spec),
        "python": {"version": sys.version.split()[0], "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "os": {"platform": platform.platform(), "system": platform.system(), "release": platform.release()},
        "cpu": {"model": cpu_model(), "count": os.cpu_count(), "machine": platform.machine()},
        "ci": ci_provenance(),
        "counts": counts(records),
        "tests": {r.nodeid: {"outcome": r.outcome, "duration": round(r.duration, 6),
                             **({"failure_class": r.failure_class} if r.failure_class else {}),
                             **({"flaky": True} if r.flaky else {})} for r in records},
        **_shard_plan(spec, started),
    }


def _shard_plan(spec: RunSpec, started: float) -> dict[str, Any]:
    """A leg's plan (what its collection saw and kept), for merges to check the partition."""
    if spec.shard is None:
        return {}
    return {PLAN_KEY: read_plan(spec.out_dir, spec.shard, started)}


def write_manifest(path: Path, manifest: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(manifest, indent=2, sort_keys=False) + "\n")
