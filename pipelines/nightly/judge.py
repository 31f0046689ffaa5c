"""The judge: tonight's backend and tree against the standing configs, as they stand.

A config that was reviewed and merged is what the backend's CI runs. A nightly run over an
``--out`` that holds configs therefore starts by running them, unchanged, on the device,
before regeneration touches anything: the night's verdict and exit code come from that run
(a ``mandatory_success`` that fails is a regression, pipelines/nights/assess.py), not from
configs the night itself rewrote. The configs are copied into the run folder first
(``standing/``): what was judged stays readable after emit rewrites ``--out``, and it is
the "old" side of the night's config diff.

The run's identity (pipelines/nights/identity.py) is taken here, before anything runs.
A first run (no configs yet), a delta run (``upgrade``) and ``--no-execute`` judge nothing.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from testcurator.memory.run_identity import config_digest
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.emit import SIDECAR
from testcurator.pipelines.nightly import steps
from testcurator.pipelines.nights import identity
from testcurator.pipelines.store import RunStore

STANDING, JUDGE = steps.STANDING, steps.JUDGE


def has_configs(folder: Path) -> bool:
    return folder.is_dir() and any(folder.rglob("*.yaml"))


def snapshot(ctx: RunContext, store: RunStore) -> Path | None:
    """The standing configs, copied into the run folder once (None: there are none)."""
    dest = store.path(STANDING)
    if dest.is_dir():
        return dest  # a resumed run judges what it found when it started
    if not has_configs(ctx.configs_dir):
        return None
    tmp = Path(tempfile.mkdtemp(prefix=".standing.", dir=store.root))
    try:
        for path in [*ctx.configs_dir.rglob("*.yaml"), ctx.configs_dir / SIDECAR]:
            if path.is_file():
                target = tmp / path.relative_to(ctx.configs_dir)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
        tmp.replace(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def judge(ctx: RunContext, store: RunStore) -> dict[str, Any]:
    """Take the run's identity, then run the standing configs on the device (``judge.json``)."""
    standing = None if ctx.delta else snapshot(ctx, store)
    identity.take(ctx, store, standing)
    if store.has(JUDGE):
        return store.read_json(JUDGE)
    if standing is None or not ctx.execute:
        why = ("a delta run (upgrade) judges nothing" if ctx.delta else "no configs in --out yet: a first run"
               if standing is None else "--no-execute")
        skipped = {"standing": standing is not None, "judged": False, "why": why}
        store.write_json(JUDGE, skipped)
        return skipped
    ctx.say(f"judge: running the standing configs ({standing}) on {ctx.device} as they stand")
    records = steps.run_suite(ctx, store, standing, "judge", ctx.retries)
    summary = steps.suite_summary(records, store.path("judge", "results.jsonl"))
    data = {"standing": True, "judged": True, "digest": config_digest(standing), **summary}
    store.write_json(JUDGE, data)
    ctx.say("judge: " + ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items())
            + f"; {len(summary['mandatory_failures'])} mandatory failure(s) or strict unexpected pass(es)")
    return data
