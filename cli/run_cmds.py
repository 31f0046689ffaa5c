"""`testcurator run`: the nightly pipeline end to end."""

from __future__ import annotations

import typer
from rich.console import Console

from testcurator.cli.commands import command, invocation
from testcurator.cli.options import (BackendReq, Brain, CaptureOps, Embed, Execute, ExecutorName, LlmBaseUrl, LlmModel,
                                     OutDirReq, Probe, Resume, Retries, Shards, StateDir, Timeout, TorchRootReq,
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
    probe: Probe = True,
    llm_base_url: LlmBaseUrl = None,
    llm_model: LlmModel = None,
    executor: ExecutorName = "local",
    shards: Shards = 1,
) -> None:
    """Curate the upstream tree for a backend: scope, memory, bucket, refine; write configs/ and report.md/.json to --out."""
    from testcurator.pipelines.context import RunContext
    from testcurator.pipelines.report import finish_report
    from testcurator.pipelines.run import run_nightly

    console = Console(highlight=False)
    ctx = RunContext.create(torch_root=torch_root, backend=backend, out_dir=out, state_dir=resolve_state_dir(state_dir),
                            brain=brain, llm_base_url=llm_base_url, llm_model=llm_model, execute=execute, resume=resume,
                            workers=workers or 1, timeout=timeout, retries=retries, embed=embed, capture_ops=capture_ops, probe=probe,
                            executor=executor, shards=shards, say=lambda message: console.print(message, markup=False))
    state = run_nightly(ctx)
    code = finish_report(out, invocation()) if (out / "report.json").is_file() else 0
    verify = state.get("verified")
    console.print(f"done: configs in {out / 'configs'}, report {state.get('report')}"
                  + ("" if verify is None else f" (verified on the device: {bool(verify)})")
                  + (f"; exit {code}: mandatory_success failures in the verification run (see the report)" if code else ""),
                  markup=False)
    if code:
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    command(app, "run")(run_cmd)
