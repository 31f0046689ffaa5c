"""Start or resume a nightly run: the thread, the checkpointer and the graph.

Runs live under ``<state-dir>/runs/<thread id>/``; ``latest.json`` names the newest, which
``--resume`` continues from its last checkpoint (SQLite, ``<state-dir>/checkpoints.sqlite``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from testcurator.errors import BadInputError
from testcurator.files import atomic_write_text
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.nightly.graph import build_nightly_graph

LATEST = "latest.json"


def resumable(state_dir: Path, out_dir: Path) -> dict[str, Any]:
    """The last run's record (``latest.json``), when ``--resume`` can continue it into
    ``out_dir``; else bad input that says why (checked before the backend is imported)."""
    runs = state_dir / "runs"
    latest = runs / LATEST
    if not latest.exists():
        raise BadInputError(f"nothing to resume: no run recorded under {runs} (run without --resume to start one)")
    data = json.loads(latest.read_text(encoding="utf-8"))
    if Path(data["out_dir"]) != out_dir.resolve():
        raise BadInputError(f"nothing to resume into {out_dir}: the last run wrote to {data['out_dir']}")
    return data


def _thread(ctx: RunContext, kind: str = "nightly") -> tuple[str, Path, bool]:
    """(thread id, run dir, resuming?) for this invocation."""
    runs = ctx.state_dir / "runs"
    latest = runs / LATEST
    if ctx.resume:
        data = resumable(ctx.state_dir, ctx.out_dir)
        return data["thread_id"], Path(data["run_dir"]), True
    thread_id = f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    run_dir = runs / thread_id
    run_dir.mkdir(parents=True, exist_ok=True)
    if kind != "nightly":
        return thread_id, run_dir, False  # only nightly runs are resumable with `run --resume`
    atomic_write_text(latest, json.dumps({"thread_id": thread_id, "run_dir": str(run_dir),
                                          "out_dir": str(ctx.out_dir)}, indent=1) + "\n")
    return thread_id, run_dir, False


def run_nightly(ctx: RunContext) -> dict[str, Any]:
    """Run (or, with ``ctx.resume``, resume) the pipeline; returns the final state.

    A delta run (``ctx.only_tests``, from ``testcurator upgrade``) is recorded as an upgrade
    thread, which ``run --resume`` does not pick up. A run that would only repeat the last one
    (pipelines/nights/uptodate.py) runs nothing: the state names that run (``up_to_date``).
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    from testcurator.pipelines.nights import uptodate
    from testcurator.pipelines.store import RunStore

    key = None if ctx.resume or ctx.delta else uptodate.run_key(ctx)
    unchanged = uptodate.unchanged_since(ctx, key, ctx.reuse_within_s) if key else None
    if unchanged is not None:
        ctx.say(unchanged.line())
        return {"up_to_date": unchanged.run.run_id, "report": str(ctx.out_dir / "report.md")}
    if not ctx.checked:
        ctx.preflight()  # only now: a run that runs nothing needs no backend import nor a pytest start
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    thread_id, run_dir, resuming = _thread(ctx, "upgrade" if ctx.delta else "nightly")
    if key is not None:
        uptodate.write_key(RunStore(run_dir), key)
    cfg = {"configurable": {"thread_id": thread_id}, "max_concurrency": 1}
    ctx.state_dir.mkdir(parents=True, exist_ok=True)
    with SqliteSaver.from_conn_string(str(ctx.state_dir / "checkpoints.sqlite")) as saver:
        graph = build_nightly_graph(saver)
        if resuming:
            if not graph.get_state(cfg).next:
                ctx.say(f"run {thread_id} had already finished; nothing to resume")
                return dict(graph.get_state(cfg).values)
            ctx.say(f"resuming {thread_id}")
            return graph.invoke(None, cfg, context=ctx, durability="sync")
        ctx.say(f"run {thread_id}")
        return graph.invoke({"run_dir": str(run_dir)}, cfg, context=ctx, durability="sync")
