"""Start or resume a nightly run: profile, brain, checkpointer, thread, and the graph.

Runs live under ``<state-dir>/runs/<thread id>/``; ``latest.json`` names the newest, which
``--resume`` continues from its last checkpoint (SQLite, ``<state-dir>/checkpoints.sqlite``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testcurator.agents.brain import BackendContext, BrainSettings, make_brain
from testcurator.agents.decision import FileDecision
from testcurator.config.profile import BackendProfile, load_profile
from testcurator.files import atomic_write_text
from testcurator.errors import BadInputError, MissingPathError
from testcurator.pipelines.context import RunContext, Say
from testcurator.pipelines.nightly import build_nightly_graph
from testcurator.pipelines.store import RunStore

LATEST = "latest.json"


@dataclass(frozen=True)
class RunOptions:
    torch_root: Path
    backend: Path
    out_dir: Path
    state_dir: Path
    brain: str = "offline"
    execute: bool = True
    resume: bool = False
    workers: int = 1
    timeout: float = 300.0
    retries: int = 1
    embed: bool = True
    capture_ops: bool = True
    llm_base_url: str | None = None
    llm_model: str | None = None


def _backend_context(profile: BackendProfile, sources: list[Path]) -> BackendContext:
    registered: frozenset[str] = frozenset()
    has_fallback = False
    if profile.discover_ops and sources:
        from testcurator.memory.discover import discover_ops

        found = discover_ops(sources, profile.device.torch_name)
        registered, has_fallback = found.ops("aten"), found.has_fallback
    return BackendContext.from_profile(profile, registered_ops=registered, has_fallback=has_fallback)


def _brain(opts: RunOptions) -> Any:
    llm = None
    if opts.brain == "llm":
        from testcurator.agents.llm_client import LLMSettings

        llm = LLMSettings.from_env(base_url=opts.llm_base_url, model=opts.llm_model)
        if llm is None:
            raise BadInputError("--brain llm needs an endpoint: set OPENAI_BASE_URL (or --llm-base-url); "
                                "testcurator never calls the public API by default")
    return make_brain(opts.brain, BrainSettings(llm=llm, state_dir=opts.state_dir))


def make_context(opts: RunOptions, say: Say) -> RunContext:
    if not opts.torch_root.is_dir():
        raise MissingPathError(opts.torch_root, "torch root")
    profile, paths = load_profile(opts.backend)
    return RunContext(
        torch_root=opts.torch_root.resolve(), profile=profile, profile_path=opts.backend.resolve(),
        out_dir=opts.out_dir.resolve(), state_dir=opts.state_dir.resolve(), brain=_brain(opts),
        backend=_backend_context(profile, paths["source_paths"]), execute=opts.execute,
        capture_ops=opts.capture_ops, embed=opts.embed, workers=opts.workers, timeout=opts.timeout,
        retries=opts.retries, say=say,
    )


def _thread(opts: RunOptions, kind: str = "nightly") -> tuple[str, Path, bool]:
    """(thread id, run dir, resuming?) for this invocation."""
    runs = opts.state_dir / "runs"
    latest = runs / LATEST
    if opts.resume:
        if not latest.exists():
            raise BadInputError(f"nothing to resume: no run recorded under {runs}")
        data = json.loads(latest.read_text(encoding="utf-8"))
        if Path(data["out_dir"]) != opts.out_dir.resolve():
            raise BadInputError(f"the last run wrote to {data['out_dir']}, not {opts.out_dir.resolve()}")
        return data["thread_id"], Path(data["run_dir"]), True
    thread_id = f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    run_dir = runs / thread_id
    run_dir.mkdir(parents=True, exist_ok=True)
    if kind != "nightly":
        return thread_id, run_dir, False  # only nightly runs are resumable with `run --resume`
    atomic_write_text(latest, json.dumps({"thread_id": thread_id, "run_dir": str(run_dir),
                                          "out_dir": str(opts.out_dir.resolve())}, indent=1) + "\n")
    return thread_id, run_dir, False


def run_nightly(opts: RunOptions, say: Say, *, ctx: RunContext | None = None,
                scope: Sequence[FileDecision] | None = None) -> dict[str, Any]:
    """Run (or resume) the pipeline; returns the final state.

    ``ctx`` (a delta run: ``testcurator upgrade``) replaces the context built from ``opts``,
    and ``scope`` the scope stage's decisions, already made by the caller.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    delta = ctx is not None and ctx.delta
    ctx = ctx if ctx is not None else make_context(opts, say)
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    thread_id, run_dir, resuming = _thread(opts, "upgrade" if delta else "nightly")
    if scope is not None:
        RunStore(run_dir).write_scope(scope)
    cfg = {"configurable": {"thread_id": thread_id}, "max_concurrency": 1}
    opts.state_dir.mkdir(parents=True, exist_ok=True)
    with SqliteSaver.from_conn_string(str(opts.state_dir / "checkpoints.sqlite")) as saver:
        graph = build_nightly_graph(saver)
        if resuming:
            if not graph.get_state(cfg).next:
                say(f"run {thread_id} had already finished; nothing to resume")
                return dict(graph.get_state(cfg).values)
            say(f"resuming {thread_id}")
            return graph.invoke(None, cfg, context=ctx, durability="sync")
        say(f"run {thread_id}")
        return graph.invoke({"run_dir": str(run_dir)}, cfg, context=ctx, durability="sync")
