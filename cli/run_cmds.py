"""`testcurator run`: the nightly pipeline end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from testcurator.memory.paths import resolve_state_dir


def run_cmd(
    torch_root: Annotated[Path, typer.Option("--torch-root", help="Upstream tree (holds test/).")],
    backend: Annotated[Path, typer.Option("--backend", help="The backend profile (backend.yaml).")],
    out: Annotated[Path, typer.Option("--out", help="Output folder: configs/ and report.md/.json.")],
    brain: Annotated[str, typer.Option("--brain", help="offline (default, no network) or llm (needs OPENAI_BASE_URL).")] = "offline",
    execute: Annotated[bool, typer.Option("--execute/--no-execute", help="Run the draft on the device and refine from results.")] = True,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the last run from its checkpoint.")] = False,
    state_dir: Annotated[Optional[Path], typer.Option("--state-dir", help="Memory, caches and checkpoints (default .testcurator/).")] = None,
    workers: Annotated[int, typer.Option("-n", "--workers", min=1, help="pytest-xdist workers for test runs.")] = 1,
    timeout: Annotated[float, typer.Option("--timeout", min=1, help="Seconds before a hanging test is killed.")] = 300.0,
    retries: Annotated[int, typer.Option("--retries", min=0, help="Reruns of failing tests (flaky vs consistent).")] = 1,
    embed: Annotated[bool, typer.Option("--embed/--no-embed", help="Per-test embeddings (similar tests).")] = True,
    capture_ops: Annotated[bool, typer.Option("--capture-ops/--no-capture-ops", help="Run tests once on CPU to map them to aten ops.")] = True,
    llm_base_url: Annotated[Optional[str], typer.Option("--llm-base-url", help="OpenAI-compatible endpoint (else OPENAI_BASE_URL).")] = None,
    llm_model: Annotated[Optional[str], typer.Option("--llm-model", help="Model name (else TESTCURATOR_LLM_MODEL).")] = None,
) -> None:
    """Curate the upstream tree for a backend: scope, memory, bucket, refine; write configs and a report."""
    from testcurator.pipelines.context import RunContext
    from testcurator.pipelines.run import run_nightly

    console = Console(highlight=False)
    ctx = RunContext.create(torch_root=torch_root, backend=backend, out_dir=out, state_dir=resolve_state_dir(state_dir),
                            brain=brain, llm_base_url=llm_base_url, llm_model=llm_model, execute=execute, resume=resume,
                            workers=workers, timeout=timeout, retries=retries, embed=embed, capture_ops=capture_ops,
                            say=lambda message: console.print(message, markup=False))
    state = run_nightly(ctx)
    verify = state.get("verified")
    console.print(f"done: configs in {out / 'configs'}, report {state.get('report')}"
                  + ("" if verify is None else f" (verified on the device: {bool(verify)})"), markup=False)


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command("run")(run_cmd)
