"""A rerun with nothing changed: the last run's configs, report and verdict stand.

A run's outcome depends on its key (:func:`run_key`): the backend digest (profile, sources,
installed module, the environment it names), torch, the upstream tree, testcurator's own
code and the run's settings. Each nightly run writes its key into its run folder
(``run_key.json``). When the last recorded run of the same ``--out`` has the same key,
finished with exit 0 after verifying its configs, and the configs in ``--out`` are still the
ones it wrote, a new run can find nothing it did not: :func:`unchanged_since` names that run,
and ``run`` says so and stops, in seconds instead of the pipeline's hour (make's "nothing to
be done", Bazel's cached test result).

Only within ``reuse_within_s`` of that run's end (``run --reuse-within``, 12 hours by
default): a night a day later runs the tests again, since what no key records (the device's
driver or firmware, a flaky test) shows only there. A run that failed, an LLM brain (its
answers are not reproducible), a delta run and ``--resume`` always run.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from testcurator.memory.history import HISTORY_DB, History, RunIdentity
from testcurator.memory.run_identity import config_digest
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.nights import identity
from testcurator.pipelines.nights.identity import RUN_KEY
from testcurator.pipelines.store import RunStore

DEFAULT_REUSE_WITHIN_S = 12 * 3600.0
# The settings a run's outcome depends on (RunContext's fields); paths, progress and the
# resume flag are not among them, and --out and the state directory select the history.
_SETTINGS = ("execute", "capture_ops", "capture_budget_s", "capture_all", "probe", "embed", "workers", "timeout",
             "memory_limit_mb", "recycle_mb", "retries", "executor", "shards", "accept_regressions")


_PACKAGES = ("", ".agents", ".cli", ".config", ".memory", ".pipelines", ".plugin", ".prompts", ".runner")


def _code_digest() -> str:
    """16 hex digits over testcurator's own sources and prompts, found by their import specs
    (an editable install maps each subpackage to a folder of its own): a changed tool reruns."""
    import importlib.util

    files: set[Path] = set()
    for suffix in _PACKAGES:
        spec = importlib.util.find_spec("testcurator" + suffix)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            files.update(p for p in Path(folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts
                         and p.suffix in (".py", ".md", ".txt", ".sh", ".yml", ".yaml", ".json"))
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def run_key(ctx: RunContext) -> dict[str, Any]:
    """What this run's outcome depends on (see the module docstring); its backend, torch and
    upstream entries are those of the run's identity (pipelines/nights/identity.py)."""
    return {**identity.identity_inputs(ctx), "torch_root": str(ctx.torch_root), "profile": str(ctx.profile_path),
            "testcurator": _code_digest(), "brain": ctx.brain.name,
            "settings": {name: getattr(ctx, name) for name in _SETTINGS}}


def write_key(store: RunStore, key: dict[str, Any]) -> None:
    store.write_json(RUN_KEY, key)  # the run's identity takes its first entries from it


@dataclass(frozen=True)
class Unchanged:
    """The run whose results stand, and how long ago it ended."""

    run: RunIdentity
    age_s: float

    def line(self) -> str:
        ago = _ago(self.age_s)
        return (f"up to date: nothing changed since run {self.run.run_id} ({ago} ago, exit {self.run.exit_code}): "
                "the backend, torch, the upstream tree, testcurator, the run's settings and the configs in --out are "
                "the ones it ran with. Its configs, report and verdict stand; nothing ran (`--reuse-within 0` runs "
                "it again)")


def _ago(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{int(seconds % 60):02d}s"


def unchanged_since(ctx: RunContext, key: dict[str, Any], reuse_within_s: float,
                    now: datetime | None = None) -> Unchanged | None:
    """The last run of ``--out`` whose results this run would only repeat, else None."""
    if reuse_within_s <= 0 or ctx.resume or ctx.delta or ctx.brain.name != "offline":
        return None
    if not (ctx.state_dir / HISTORY_DB).is_file():
        return None  # no run recorded (and opening the history would create one)
    with History(ctx.state_dir) as history:
        runs = [r for r in history.runs(str(ctx.out_dir)) if r.kind == "nightly"]
    if not runs:
        return None
    last = runs[-1]
    if last.exit_code != 0 or not last.config_digest or last.config_digest != config_digest(ctx.configs_dir):
        return None
    store = RunStore(ctx.state_dir / "runs" / last.run_id)
    ended = _ended(store)
    if ended is None or store.read_json(RUN_KEY) != json.loads(json.dumps(key)):
        return None
    age = ((now or datetime.now(timezone.utc)) - ended).total_seconds()
    return Unchanged(last, age) if 0 <= age <= reuse_within_s else None


def _ended(store: RunStore) -> datetime | None:
    """When the run wrote its report (its ``run.json``), else None: a run that did not end."""
    path = store.path("run.json")
    if not path.is_file():
        return None
    return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
