"""The work behind the nightly graph's nodes, kept apart so each node stays a few lines.

Every step reads its inputs from the run directory (RunStore) and the memory, and writes
its outputs there. Bucket and refine, once per file, are pipelines/decide.py's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from testcurator.agents.decision import LLM_BRAIN, Decision
from testcurator.config.editor import ConfigEditor
from testcurator.config.layout import config_path, raw_path
from testcurator.errors import ExecutionError
from testcurator.pipelines import decide
from testcurator.pipelines import emit as emitter
from testcurator.pipelines.context import RunContext
from testcurator.memory.capability import read_probe_evidence
from testcurator.memory.opmap import OpMap
from testcurator.memory.evidence import read_evidence
from testcurator.memory.stage import EVIDENCE
from testcurator.memory.run_identity import config_digest
from testcurator.pipelines.emit_guard import check_before_disk
from testcurator.pipelines.nightly import isolation, reverify
from testcurator.pipelines.nights.assess import Assessment, quarantine_decision
from testcurator.pipelines.probe import PROBE_EVIDENCE, ProbeTarget, run_probe
from testcurator.pipelines.store import RunStore
from testcurator.plugin.only import write_keys
from testcurator.runner.command import RunSpec
from testcurator.runner.shards.durations import DurationStore
from testcurator.runner.progress import LineProgress
from testcurator.runner.shards.executors import Executor, ExecutorOptions
from testcurator.runner.shards.registry import make_executor
from testcurator.runner.shards.run import run_sharded
from testcurator.runner.results.records import read_jsonl, write_jsonl
from testcurator.runner.reconcile import is_infrastructure
from testcurator.runner.verdict import verdict
from testcurator.vocab import FAILING, UNEXPECTED_PASS, TestKey

EXEC_CONFIG = "exec_config"
STANDING = "standing"  # the configs of --out as they stood when the run started (nightly/judge.py)
JUDGE = "judge.json"


def probe(ctx: RunContext, store: RunStore) -> dict[str, Any]:
    """Replay the captured calls on the device (new ones only); the findings per test go to
    ``probe_evidence.json`` for the bucket stage and the draft."""
    target = ProbeTarget(ctx.profile, ctx.profile_path, ctx.state_dir)
    return run_probe(target, evidence_out=store.path(PROBE_EVIDENCE), tests=ctx.only_tests, workers=ctx.workers,
                     say=ctx.say)


def count_modes(store: RunStore, stage: str, files: Sequence[str]) -> str:
    counts: Counter[str] = Counter()
    for rel in files:
        counts.update(d.mode for d in store.read_decisions(stage, rel) or [])
    return ", ".join(f"{mode} {n}" for mode, n in sorted(counts.items())) or "no tests"


def write_exec_config(ctx: RunContext, store: RunStore, files: Sequence[str]) -> Path:
    """The draft as a config that runs every non-skipped test as mandatory (raw outcomes).

    Predicted failures run too: a prediction from the CPU capture is confirmed or overturned
    here, never emitted on its own (see pipelines/probe.py)."""
    root = store.path(EXEC_CONFIG)
    broken = decide.not_importing(store)
    for rel in files:
        if rel in broken:
            continue  # nothing of it can run; its collection error would only repeat
        path = config_path(root, rel)
        editor = ConfigEditor.new(path, global_=emitter.capabilities(ctx.profile))
        specs = []
        for decision in store.read_decisions("bucket", rel) or []:
            spec = emitter.entry_for(decision)
            mode = "skip" if spec.mode == "skip" else "mandatory_success"
            specs.append(type(spec)(spec.names, mode, spec.reason, spec.edits))
        editor.update(raw_path(rel), specs)
        editor.save()
    return root


def executor(ctx: RunContext, resources: dict[str, float] | None = None) -> Executor:
    """The run's executor; a test shard asks for the profile's resources (the device)."""
    res = dict(ctx.profile.resources) if resources is None else resources
    return make_executor(ctx.executor, ExecutorOptions(resources=res, say=ctx.say))


def run_suite(ctx: RunContext, store: RunStore, config: Path, out: str, retries: int,
              settled: frozenset[str] = frozenset(), isolate: isolation.Isolation = isolation.Isolation(),
              only: frozenset[TestKey] | None = None, instances: Sequence[tuple[str, str]] = ()) -> list[Any]:
    """Run ``config`` on the device into ``<run>/<out>/`` (reused when a resumed run finds it);
    failures of the ``settled`` tests are not retried; ``isolate`` says which tests each run
    in a forked process; with ``only`` and ``instances`` (instance key, generic name), only
    those tests and instances."""
    done = store.path(out, "results.jsonl")
    if not done.exists():
        # A delta run's draft covers only the touched files, and --curate-only leaves out their
        # other tests at collection (the config would skip them one report at a time).
        only = ctx.only_tests if only is None else only
        keep = (("--curate-only", str(write_keys(store.path(out, "delta.tests"), only or (), ctx.torch_root, instances)))
                if only or instances else ())
        known, also = isolate.write(store.path(out))
        spec = RunSpec(out_dir=store.path(out), config=config, torch_root=ctx.torch_root, device=ctx.device,
                       backend=ctx.profile.backend_module, workers=ctx.workers, timeout=ctx.timeout,
                       memory_limit_mb=ctx.memory_limit_mb, recycle_mb=ctx.recycle_mb, retries=retries,
                       env=tuple(sorted(ctx.backend_env().items())), unrelated_plugins_off=True, extra_args=keep,
                       settled=settled, isolate=isolate.dtypes, isolate_except=known, isolate_also=also)
        with DurationStore(ctx.state_dir) as durations:
            run_sharded(spec, shards=ctx.shards, executor=executor(ctx), store=durations,
                        source="draft" if out == "exec" else out,
                        progress=LineProgress("execute" if out == "exec" else out, ctx.say))
    return read_jsonl(done)


def _isolation(ctx: RunContext, store: RunStore) -> isolation.Isolation:
    evidence = read_probe_evidence(store.path(PROBE_EVIDENCE))
    if not evidence:
        return isolation.Isolation()
    opmap = OpMap(ctx.state_dir)
    try:
        return isolation.plan(evidence, opmap.instance_calls(), opmap.uncaptured_instances(plain=True))
    finally:
        opmap.close()


def failing_on_cpu(store: RunStore) -> frozenset[str]:
    """The tests every instance of which the capture saw fail on CPU: the draft does not retry
    their failures (they fail the same way there; a retry measures flakiness, not this)."""
    evidence = read_evidence(store.path(EVIDENCE))
    ran = {key: [o for o in ev.cpu.values() if o != "skipped"] for key, ev in evidence.items()}
    return frozenset(str(key) for key, outcomes in ran.items() if outcomes and all(o in FAILING for o in outcomes))


def execute_draft(ctx: RunContext, store: RunStore) -> None:
    from testcurator.pipelines.nights.night import reuse_draft

    reused = reuse_draft(ctx, store)
    if reused:
        ctx.say(f"execute: nothing changed since run {reused} (backend, torch, tree, draft config, settings): its "
                "draft results are tonight's; the standing configs ran tonight (judge)")
    isolate = _isolation(ctx, store)
    if isolate.dtypes and not reused:
        ctx.say(f"execute: each test of {', '.join(sorted(isolate.dtypes))} runs in a forked process of its own: the "
                "probe saw calls of those dtypes kill the process (a crash then ends one test, not a worker); "
                f"but for {len(isolate.known)} instance(s) whose calls are known and include no op seen to crash; "
                f"{len(isolate.also)} instance(s) that call such an op are forked whatever their dtype")
    records = run_suite(ctx, store, store.path(EXEC_CONFIG), "exec", ctx.retries, failing_on_cpu(store), isolate)
    result = verdict(records, allow_empty=True)  # a draft of skips only runs nothing, rightly
    if result.infrastructure:
        # Refining on a draft pytest did not run would curate from nothing: stop here, and
        # move the results aside so that --resume runs the draft again.
        done = store.path("exec", "results.jsonl")
        done.replace(done.with_name("results.infrastructure.jsonl"))
        raise ExecutionError("the draft run on the device failed:\n" + "\n".join(result.lines(str(done.parent))))
    outcomes = Counter(r.outcome for r in records)
    ctx.say("execute: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))


def emit_configs(ctx: RunContext, store: RunStore, files: Sequence[str], *, refined: bool) -> list[str]:
    from testcurator.pipelines.nights.night import assess_night

    night = assess_night(ctx, store, files)
    stage = "refine" if refined else "bucket"
    if any(d.brain == LLM_BRAIN for rel in files for d in store.read_decisions(stage, rel) or []):
        redone = check_before_disk(ctx.configs_dir, ctx.torch_root, store, stage, files,
                                   lambda folder: _emit_into(ctx, store, folder, files, refined, night),
                                   lambda rel, tests: decide.offline_decisions(ctx, store, rel, tests, refined))
        if redone:
            ctx.say(f"configs: {len(redone)} LLM decision(s) would not validate, decided offline (first: {redone[0]})")
    result = _emit_into(ctx, store, ctx.configs_dir, files, refined, night)
    store.write_json("emit.json", {"written": result.written, "kept_human": result.kept_human,
                                   "conflicts": result.conflicts, "pending": result.pending})
    if result.pending:
        ctx.say(f"configs: {len(result.pending)} change(s) to regressed or flaky tests kept back for review "
                "(`testcurator accept` writes them)")
    return result.written


def _night_decisions(ctx: RunContext, night: Assessment, rel: str, decisions: Sequence[Decision]) -> list[Decision]:
    """Tonight's decisions with the history's say: a flaky test the profile quarantines, and
    the regressions a person accepted (their reason says so)."""
    quarantined = {TestKey.parse(f.test).name: f for f in night.flaky if f.quarantined and TestKey.parse(f.test).file == rel}
    accepted = {TestKey.parse(t).name: f for f in night.failures if (t := f.test) in night.accepted
                and TestKey.parse(t).file == rel}
    out = []
    for d in decisions:
        if d.test in quarantined:
            d = quarantine_decision(quarantined[d.test], ctx.profile.flaky.flips)
        elif d.test in accepted:
            last = accepted[d.test].last_pass
            d = replace(d, reason=f"{d.reason} Accepted as a regression of the backend (--accept-regressions)"
                        + (f"; it last passed in run {last['run_id']} ({last['date']})." if last else "."))
        out.append(d)
    return out


def _emit_into(ctx: RunContext, store: RunStore, configs_dir: Path, files: Sequence[str], refined: bool,
               night: Assessment) -> emitter.EmitResult:
    result = emitter.EmitResult()
    sidecar = emitter.load_sidecar(configs_dir)
    executed = set()
    if refined:
        executed = {key.name for key in decide.executions(ctx, store)}
    broken = decide.not_importing(store)
    for rel in files:
        decisions = _night_decisions(ctx, night, rel, store.read_decisions("refine" if refined else "bucket", rel) or [])
        reason = decide.file_reason(broken[rel]) if rel in broken else None
        emitter.emit_file(configs_dir, ctx.torch_root, ctx.profile, rel, decisions, sidecar, executed, result,
                          drop_stale=not ctx.delta or rel in broken, file_reason=reason, hold=night.held_in(rel))
    emitter.save_sidecar(configs_dir, sidecar)
    return result


def verify(ctx: RunContext, store: RunStore) -> None:
    """Run the final curated suite as ``exec`` runs it (the same retries): mandatory failures
    now mean regressions. Without retries here, a test refine kept though flaky (it passed
    on retry in the draft, for review) failed the verification that ``exec`` passes: on
    real upstream files, three order-dependent LoggingTensor tests of test_subclass.

    Configs that end the run as they stood when it started were judged on the device at its
    start (pipelines/nightly/judge.py): that run is their verification, not run twice."""
    judged = judged_as_final(ctx, store)
    reused = 0
    if judged:
        records = read_jsonl(judged)
    else:
        records, reused = _verify_run(ctx, store)
    summary = suite_summary(records, judged or store.path("verify", "results.jsonl"))
    store.write_json("verify.json", {**summary, "reused_judge": judged is not None, "reused_draft": reused})
    outcomes = summary["outcomes"]
    ctx.say("verify: " + ("the configs are the standing ones, judged at the start of this run: " if judged else "")
            + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
            + (f" ({len(summary['flaky'])} passed only on retry)" if summary["flaky"] else ""))


def _verify_run(ctx: RunContext, store: RunStore) -> tuple[list[Any], int]:
    """The verification's records, and how many of them are the draft's (nightly/reverify.py):
    only the tests whose final entry is not the draft's mandatory one run again."""
    done, draft = store.path("verify", "results.jsonl"), store.path("exec", "results.jsonl")
    reuse = None
    if not done.exists() and draft.is_file() and not ctx.only_tests:
        reuse = reverify.plan(read_jsonl(draft), store.path(EXEC_CONFIG), ctx.configs_dir, ctx.torch_root, draft)
    if reuse is None:
        return run_suite(ctx, store, ctx.configs_dir, "verify", retries=ctx.retries), 0
    partly = f", and {len(reuse.instances)} instance(s) of tests partly verified by it" if reuse.instances else ""
    ctx.say(f"verify: {len(reuse.reused)} mandatory test(s) ran tonight in the draft under the entry they end "
            f"with, or passed there as mandatory instances of both ({len(reuse.records)} results taken from it); "
            f"running the other {len(reuse.rerun)} test(s){partly}")
    ran = (run_suite(ctx, store, ctx.configs_dir, "verify", retries=ctx.retries, only=reuse.rerun,
                     instances=reuse.instances) if reuse.rerun or reuse.instances else [])
    records = [*reuse.records, *ran]
    store.path("verify").mkdir(parents=True, exist_ok=True)
    if done.exists():
        done.replace(done.with_name("ran.jsonl"))  # this run's own results, beside the merged ones
    write_jsonl(done, records)
    return records, len(reuse.records)


def judged_as_final(ctx: RunContext, store: RunStore) -> Path | None:
    """The judge's results, when the configs the run ends with are the ones it judged."""
    data = store.read_json(JUDGE) or {}
    results = store.path("judge", "results.jsonl")
    if data.get("judged") and not data.get("infrastructure") and results.is_file() \
            and data.get("digest") == config_digest(ctx.configs_dir):
        return results
    return None


def suite_summary(records: Sequence[Any], results: Path) -> dict[str, Any]:
    """What a run of a curated suite found (``verify.json``, ``judge.json``)."""
    result = verdict(records)
    tests = [r for r in records if not is_infrastructure(r)]
    return {
        "outcomes": dict(sorted(Counter(r.outcome for r in tests).items())),
        "tests": len(tests),
        "exit_code": result.code,
        "flaky": sorted(r.nodeid for r in tests if r.flaky),
        "mandatory_failures": sorted(r.nodeid for r in result.failures),
        "strict_unexpected_passes": sorted(r.nodeid for r in result.failures if r.failure_class == UNEXPECTED_PASS),
        "unexpected_passes": sorted(r.nodeid for r in tests if r.outcome == "xpassed"),
        "infrastructure": [r.evidence for r in result.infrastructure]
        + (["no test ran"] if not tests else []),
        "lines": result.lines(str(results)),
    }


def check_reasons(ctx: RunContext, store: RunStore, files: Sequence[str]) -> None:
    """Every emitted entry's reason against the run's results (pipelines/reason_check.py):
    ``reason_check.json`` for the report, and a line with the count."""
    from testcurator.pipelines import reason_check
    from testcurator.pipelines.nights.night import read_assessment

    held = set(read_assessment(store).held)
    found = [replace(c, kept_back=c.test in held)
             for c in reason_check.check_run(store.root, ctx.configs_dir, ctx.torch_root, files)]
    store.write_json("reason_check.json", reason_check.to_json(found))
    kept = sum(c.kept_back for c in found)
    ctx.say(f"reasons: {len(found)} contradict the results"
            + (f", {kept} of them standing entries of regressed or flaky tests kept back for review" if kept else "")
            + (f" (first: {found[0].line()})" if found else ""))
