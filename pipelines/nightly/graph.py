"""The nightly pipeline as a LangGraph graph: scope -> memory -> bucket -> refine -> configs.

    judge ─► scope ─► memory ─► probe ─┬► bucket_file (one per kept file, Send) ─► draft ─► execute ─┬► refine_file (Send) ─► emit ─► verify ─► report
                                       └───────────────────────────────────────────────────────────────┘ (--no-execute: draft ─► emit)

The judge node runs the standing configs of ``--out`` on the device before regeneration
touches them (pipelines/nightly/judge.py): the night's verdict. Emit keeps the standing
entries of tests that regressed or are flaky (pipelines/nights/assess.py), and the report
node records the run in the history of runs (memory/history.py).

The probe node replays the calls the CPU capture recorded on the device (``--no-probe``: off),
so the bucket stage predicts from the device's capability table (pipelines/probe.py).

Nodes are plain functions returning partial state; their dependencies come from the frozen
:class:`RunContext` (``runtime.context``); their outputs go to the run directory and only
paths and ids enter the state. Every node reuses what an earlier, killed attempt already
wrote, so ``--resume`` (the SQLite checkpointer) finishes with the same configs as an
uninterrupted run.

Delta mode (``RunContext.only_tests``, set by ``testcurator upgrade``): the memory stage
captures only the delta's tests (memory/stage.py), the fan-outs cover only the
files holding one, bucket/refine ask only about them, emit touches only their entries, and
verify is skipped (it would rerun the whole curated suite). Its scope decisions come in
``RunContext.scope``: upgrade decides scope before the graph, to compute the delta.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from testcurator.agents.brain import BrainContext
from testcurator.agents.scope import kept_files, scope_tree
from testcurator.pipelines import decide
from testcurator.pipelines.nightly import steps
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.nightly.state import FileTask, NightlyState
from testcurator.pipelines.store import RunStore


def _store(state: NightlyState | FileTask) -> RunStore:
    return RunStore(Path(state["run_dir"]))


def judge(state: NightlyState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    from testcurator.pipelines.nightly.judge import judge as run_judge

    ctx, store = runtime.context, _store(state)
    with store.timed("judge"):
        run_judge(ctx, store)
    return {}


def scope(state: NightlyState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx, store = runtime.context, _store(state)
    with store.timed("scope"):
        decisions = store.read_scope()  # a resumed run keeps what it decided
        if decisions is None and ctx.scope is not None:
            decisions = list(ctx.scope)  # decided by the caller (upgrade), handed in the context
            store.write_scope(decisions)
        elif decisions is None:
            brain_ctx = BrainContext(ctx.backend, frozenset(), ctx.torch_root)
            decisions = scope_tree(ctx.torch_root, ctx.brain, brain_ctx)
            store.write_scope(decisions)
        files = kept_files(ctx.torch_root, decisions)
    ctx.say(f"scope: kept {sum(d.keep for d in decisions)} of {len(decisions)} folders/files -> {len(files)} test files")
    return {"files": files}


def memory(state: NightlyState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx, store = runtime.context, _store(state)
    with store.timed("memory"):
        if not store.has("memory.json"):
            store.write_json("memory.json", _memory_stage(ctx, store, state["files"]))
    figures = store.read_json("memory.json")
    ctx.say(f"memory: {figures['tests']} tests in {figures['files']} files indexed"
            f"{' + ops captured on CPU' if figures['captured'] else ''}")
    return {}


def _memory_stage(ctx: RunContext, store: RunStore, files: list[str]) -> dict[str, Any]:
    from testcurator.memory import stage

    # A capture shard runs on CPU: it asks the executor for no device.
    # Without a backend module nothing registers the device: its collection would find
    # no device-generic test, which says nothing about what the device runs.
    device = (stage.DeviceTarget(ctx.device, ctx.profile.backend_module, tuple(sorted(ctx.backend_env().items())))
              if ctx.profile.backend_module else None)
    capture = (stage.CaptureRun(steps.executor(ctx, resources={}), ctx.shards, ctx.workers, ctx.warm, device=device,
                                budget_s=ctx.capture_budget_s, rule_out=ctx.capture_rule_out())
               if ctx.capture_ops else None)
    # Embeddings come after the summaries (_summaries): with the LLM brain on, the model writes them.
    where = {"state_dir": ctx.state_dir, "work": store.root, "embed": False, "capture": capture}
    if ctx.only_tests is not None:
        figures = stage.run_delta_memory_stage(ctx.torch_root, files, ctx.only_tests, recheck=ctx.recheck_files, **where)
    else:
        figures = stage.run_memory_stage(ctx.torch_root, files, say=ctx.say, **where)
    return figures | _summaries(ctx, files)


def probe(state: NightlyState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    from testcurator.pipelines.probe import summary

    ctx, store = runtime.context, _store(state)
    if not ctx.probe:
        return {}
    with store.timed("probe"):
        if not store.has("probe.json"):  # a resumed run keeps what it probed
            store.write_json("probe.json", steps.probe(ctx, store))
    ctx.say(summary(store.read_json("probe.json")))
    return {}


def _summaries(ctx: RunContext, files: list[str]) -> dict[str, int]:
    """LLM-written summaries when the brain writes them, else the offline ones; then the
    embeddings of whichever is current."""
    from testcurator.agents.llm.summaries import drop_llm_summaries, write_llm_summaries

    if getattr(ctx.brain, "writes_summaries", False):
        return write_llm_summaries(ctx.brain, ctx.state_dir, ctx.torch_root, files, embed=ctx.embed)
    dropped = drop_llm_summaries(ctx.state_dir, embed=ctx.embed)
    return {"llm_summaries_dropped": dropped} if dropped else {}


def _fan_out(node: str, state: NightlyState, runtime: Runtime[RunContext]) -> list[Send]:
    files = runtime.context.run_files(state["files"])
    return [Send(node, FileTask(run_dir=state["run_dir"], file=f)) for f in files]


def _decide_file(stage: str, decide: Callable[[RunContext, RunStore, str], Any], task: FileTask,
                 runtime: Runtime[RunContext]) -> None:
    # Idempotent: a resumed run keeps the decisions a killed attempt already stored.
    ctx, store = runtime.context, _store(task)
    with store.timed(stage):
        if store.read_decisions(stage, task["file"]) is None:
            store.write_decisions(stage, task["file"], decide(ctx, store, task["file"]))


def fan_out_bucket(state: NightlyState, runtime: Runtime[RunContext]) -> list[Send] | str:
    # No file to decide (a delta run that only rechecks whether files import): straight on,
    # an empty fan-out would end the graph before the configs and the report.
    return _fan_out("bucket_file", state, runtime) or "draft"


def bucket_file(task: FileTask, runtime: Runtime[RunContext]) -> dict[str, Any]:
    _decide_file("bucket", decide.bucket, task, runtime)
    return {"bucketed": [task["file"]]}


def draft(state: NightlyState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx, store = runtime.context, _store(state)
    if ctx.execute:  # the draft's config is what the device runs; --no-execute runs nothing
        with store.timed("bucket"):
            steps.write_exec_config(ctx, store, ctx.run_files(state["files"]))
    ctx.say(f"bucket: {steps.count_modes(store, 'bucket', ctx.run_files(state['files']))}")
    return {}


def after_draft(state: NightlyState, runtime: Runtime[RunContext]) -> str:
    ctx = runtime.context
    return "execute" if ctx.execute and ctx.run_files(state["files"]) else "emit"


def execute(state: NightlyState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx, store = runtime.context, _store(state)
    with store.timed("refine"):
        steps.execute_draft(ctx, store)
    return {"executed": True}


def fan_out_refine(state: NightlyState, runtime: Runtime[RunContext]) -> list[Send]:
    return _fan_out("refine_file", state, runtime)


def refine_file(task: FileTask, runtime: Runtime[RunContext]) -> dict[str, Any]:
    _decide_file("refine", decide.refine, task, runtime)
    return {"refined": [task["file"]]}


def emit(state: NightlyState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx, store = runtime.context, _store(state)
    with store.timed("emit"):
        written = steps.emit_configs(ctx, store, decide.decided_files(ctx, store, state["files"]),
                                     refined=bool(state.get("executed")))
    ctx.say(f"configs: {len(written)} file(s) changed under {ctx.configs_dir}")
    return {"emitted": written}


def verify(state: NightlyState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx, store = runtime.context, _store(state)
    if not ctx.execute or ctx.delta:
        # A delta run does not rerun the whole curated suite: that would cost a full run.
        return {"verified": False}
    with store.timed("verify"):
        steps.verify(ctx, store)
    steps.check_reasons(ctx, store, list(state.get("files", [])))
    return {"verified": True}


def report(state: NightlyState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    from testcurator.pipelines.report import write_report

    ctx, store = runtime.context, _store(state)
    path = write_report(ctx, store, {**state, "files": decide.decided_files(ctx, store, state.get("files", [])),
                                     "kept": state.get("files", [])})
    ctx.say(f"report: {path}")
    return {"report": str(path)}


def build_nightly_graph(checkpointer: Any = None) -> Any:
    """The compiled graph; tests pass a fresh checkpointer (or None)."""
    graph = StateGraph(NightlyState, context_schema=RunContext)
    for name, node in (("judge", judge), ("scope", scope), ("memory", memory), ("probe", probe), ("bucket_file", bucket_file), ("draft", draft),
                       ("execute", execute), ("refine_file", refine_file), ("emit", emit), ("verify", verify),
                       ("report", report)):
        graph.add_node(name, node)
    graph.add_edge(START, "judge")
    graph.add_edge("judge", "scope")
    graph.add_edge("scope", "memory")
    graph.add_edge("memory", "probe")
    graph.add_conditional_edges("probe", fan_out_bucket, ["bucket_file", "draft"])
    graph.add_edge("bucket_file", "draft")
    graph.add_conditional_edges("draft", after_draft, ["execute", "emit"])
    graph.add_conditional_edges("execute", fan_out_refine, ["refine_file"])
    graph.add_edge("refine_file", "emit")
    graph.add_edge("emit", "verify")
    graph.add_edge("verify", "report")
    graph.add_edge("report", END)
    return graph.compile(checkpointer=checkpointer)
