"""`testcurator run`: the nightly pipeline end to end."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from testcurator.cli.commands import command, invocation
from testcurator.cli.paths import removing_if_created
from testcurator.cli.options import (AcceptRegressions, BackendReq, Brain, CaptureAll, CaptureBudget, CaptureOps, Embed, Execute,
                                     ExecutorName, KeepRuns, LlmBaseUrl, LlmBudget, LlmModel, MemoryLimitMb, OutDirReq, RecycleMb, Probe,
                                     Resume, Retries, ReuseWithin, Shards, StateDir, Timeout, TorchRootReq, Wait,
                                     Workers)
from testcurator.memory.paths import resolve_state_dir


def run_cmd(
    torch_root: TorchRootReq,
    backend: BackendReq,
    out: OutDirReq,
    brain: Brain = "offline",
    execute: Execute = True,
    resume: Resume = False,
    state_dir: StateDir = None,
    workers: Workers = 1,
    timeout: Timeout = 300.0,
    memory_limit_mb: MemoryLimitMb = 0.0,
    recycle_mb: RecycleMb = 0.0,
    retries: Retries = 1,
    embed: Embed = True,
    capture_ops: CaptureOps = True,
    capture_budget_s: CaptureBudget = None,
    capture_all: CaptureAll = False,
    probe: Probe = True,
    llm_base_url: LlmBaseUrl = None,
    llm_model: LlmModel = None,
    llm_budget_s: LlmBudget = None,
    executor: ExecutorName = "local",
    shards: Shards = 1,
    accept_regressions: AcceptRegressions = False,
    wait: Wait = 0.0,
    keep_runs: KeepRuns = 60,
    reuse_within: ReuseWithin = 12.0,
) -> None:
    """Curate the upstream tree for a backend: scope, memory, bucket, refine; write configs/ and report.md/.json to --out.

    The backend module of --backend is imported first (a module that does not import is
    bad input). When --out already holds configs, they are judged first, as they stand, on
    the device: a mandatory_success test of theirs that fails tonight is a regression (exit
    1, named in the last lines), and the change regeneration proposes for it is kept back
    for review unless --accept-regressions. Exit codes: 0 the curated suite held (the
    standing configs tonight and the verification of the new ones; or not verified:
    --no-execute); 1 it did not (a mandatory_success failure or a strict unexpected pass
    of the new configs); 2 bad input; 3 infrastructure failure (pytest could not run, its
    results are cut short, or another run holds --out or the state directory). A run that
    would only repeat the last one (nothing changed, it ended with exit 0 within
    --reuse-within hours) runs nothing, says so and exits 0.
    """
    from testcurator.lock import hold, run_locks

    state = resolve_state_dir(state_dir)
    console = Console(highlight=False, soft_wrap=True)  # node ids and paths are never wrapped
    settings = dict(brain=brain, llm_base_url=llm_base_url, llm_model=llm_model, llm_budget_s=llm_budget_s,
                    execute=execute, resume=resume, workers=workers or 1, timeout=timeout,
                    memory_limit_mb=memory_limit_mb or None, recycle_mb=recycle_mb or None, retries=retries, embed=embed,
                    capture_ops=capture_ops, probe=probe, capture_budget_s=capture_budget_s, capture_all=capture_all,
                    executor=executor,
                    shards=shards, accept_regressions=accept_regressions, history_keep=keep_runs,
                    reuse_within_s=reuse_within * 3600.0,
                    say=lambda message: console.print(message, markup=False))
    # An --out folder this run made is removed again when it stops before writing in it (bad
    # input found late, nothing to resume, an interrupt, another run holding the lock).
    with removing_if_created(out), removing_if_created(state), \
            hold(run_locks(state, out), invocation(), wait_s=wait, say=settings["say"]):
        if resume:
            from testcurator.pipelines.nightly.run import resumable

            resumable(state, out)  # bad input before the backend is imported and built
        from testcurator.pipelines.context import RunContext
        from testcurator.pipelines.nightly.run import run_nightly

        # The preflight checks run in run_nightly, after its up-to-date check (a no-op night costs
        # neither a backend import nor a pytest start).
        ctx = RunContext.create(torch_root=torch_root, backend=backend, out_dir=out, state_dir=state,
                                preflight=False, **settings)
        final = _run(run_nightly, ctx, console)
    _finish(out, final, console)


def _run(run_nightly: Callable[[Any], dict[str, Any]], ctx: Any, console: Console) -> dict[str, Any]:
    """Run the pipeline; an --out folder it made is removed again when the run stops before
    writing in it (bad input found late, an interrupt)."""
    try:
        with removing_if_created(ctx.out_dir):
            return run_nightly(ctx)
    except KeyboardInterrupt:
        console.print(f"interrupted: the run stopped; `testcurator run ... --out {ctx.out_dir} --resume` continues it "
                      "from its last finished stage", markup=False)
        raise


def _finish(out: Path, state: dict[str, Any], console: Console) -> None:
    """The verdict as the command's last lines: the verification, then the standing configs'
    judge, regressions first (pipelines/nights/since.py). A run that ran nothing (nothing
    changed, pipelines/nights/uptodate.py) prints the lines of the run whose results stand,
    each said to be that run's, and leaves its report as it was."""
    import json

    from testcurator.pipelines.nights.since import verdict_lines
    from testcurator.pipelines.report import finish_report
    from testcurator.pipelines.report_md import regressed

    reused = state.get("up_to_date")
    report = out / "report.json"
    code = finish_report(out, invocation()) if report.is_file() and not reused else 0
    data = json.loads(report.read_text(encoding="utf-8")) if report.is_file() else {}
    console.print(f"done: configs in {out / 'configs'}, report {state.get('report')}"
                  + (f" (both from run {reused}; unchanged)" if reused else ""), markup=False)
    verify = data.get("verify") or {}
    lines = verification_lines(verify, bool(verify) if reused else bool(state.get("verified")))
    if regressed(data.get("judge") or {}) and verify.get("exit_code") == 0 and lines:
        # Tonight's configs passed (a change accepted); the night did not: no line says "held".
        where = lines[-1].rpartition("; results: ")[2]
        lines[-1] = f"tonight's configs passed their verification run ({verify.get('tests', 0)} test(s)); results: {where}"
    prefix = f"as run {reused} found: " if reused else ""
    for line in lines + verdict_lines({**data, "out_dir": str(out)}):
        console.print(prefix + line, markup=False)
    if code:
        raise typer.Exit(code)


def verification_lines(verify: dict[str, Any] | None, verified: bool) -> list[str]:
    """The verification run's verdict (what failed and where)."""
    if not verified or not verify:
        return ["not verified on the device (--no-execute, or a delta run): exit 0 says nothing about the device"]
    return list(verify.get("lines") or [])


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    command(app, "run")(run_cmd)
