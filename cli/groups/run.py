"""`testcurator run`: the nightly pipeline end to end."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from testcurator.cli.commands import command, invocation
from testcurator.cli.paths import removing_if_created
from testcurator.cli.options import (BackendReq, Brain, CaptureBudget, CaptureOps, Embed, Execute, ExecutorName,
                                     LlmBaseUrl, LlmBudget, LlmModel, OutDirReq, Probe, Resume, Retries, Shards, StateDir, Timeout, TorchRootReq,
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
    retries: Retries = 1,
    embed: Embed = True,
    capture_ops: CaptureOps = True,
    capture_budget_s: CaptureBudget = None,
    probe: Probe = True,
    llm_base_url: LlmBaseUrl = None,
    llm_model: LlmModel = None,
    llm_budget_s: LlmBudget = None,
    executor: ExecutorName = "local",
    shards: Shards = 1,
) -> None:
    """Curate the upstream tree for a backend: scope, memory, bucket, refine; write configs/ and report.md/.json to --out.

    The backend module of --backend is imported first (a module that does not import is
    bad input). Exit codes: 0 the curated suite held in the verification run (or was not
    verified: --no-execute); 1 it did not (a mandatory_success failure or a strict
    unexpected pass, named in the last lines); 2 bad input; 3 infrastructure failure
    (pytest could not run the draft or the verification, or its results are cut short).
    """
    from testcurator.pipelines.context import RunContext
    from testcurator.pipelines.report import finish_report
    from testcurator.pipelines.nightly.run import resumable, run_nightly

    if resume:
        resumable(resolve_state_dir(state_dir), out)  # bad input before the backend is imported and built
    console = Console(highlight=False, soft_wrap=True)  # node ids and paths are never wrapped
    ctx = RunContext.create(torch_root=torch_root, backend=backend, out_dir=out, state_dir=resolve_state_dir(state_dir),
                            brain=brain, llm_base_url=llm_base_url, llm_model=llm_model, llm_budget_s=llm_budget_s, execute=execute, resume=resume,
                            workers=workers or 1, timeout=timeout, retries=retries, embed=embed, capture_ops=capture_ops, probe=probe,
                            capture_budget_s=capture_budget_s, executor=executor, shards=shards,
                            say=lambda message: console.print(message, markup=False))
    state = _run(run_nightly, ctx, console)
    code = finish_report(out, invocation()) if (out / "report.json").is_file() else 0
    console.print(f"done: configs in {out / 'configs'}, report {state.get('report')}", markup=False)
    for line in verification_lines(out, bool(state.get("verified"))):
        console.print(line, markup=False)
    if code:
        raise typer.Exit(code)


def _run(run_nightly: Callable[[Any], dict[str, Any]], ctx: Any, console: Console) -> dict[str, Any]:
    """Run the pipeline; an --out folder it made is removed again when the run stops before
    writing in it (bad input found late, nothing to resume, an interrupt)."""
    try:
        with removing_if_created(ctx.out_dir):
            return run_nightly(ctx)
    except KeyboardInterrupt:
        console.print(f"interrupted: the run stopped; `testcurator run ... --out {ctx.out_dir} --resume` continues it "
                      "from its last finished stage", markup=False)
        raise


def verification_lines(out: Path, verified: bool) -> list[str]:
    """The verification run's verdict (what failed and where), as the command's last lines."""
    import json

    report = out / "report.json"
    verify = json.loads(report.read_text(encoding="utf-8")).get("verify") if report.is_file() else None
    if not verified or not verify:
        return ["not verified on the device (--no-execute, or a delta run): exit 0 says nothing about the device"]
    return list(verify.get("lines") or [])


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    command(app, "run")(run_cmd)
