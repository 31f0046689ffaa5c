"""`testcurator upgrade` and `testcurator enable-op`: change a curated config by a delta."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from testcurator.memory.paths import resolve_state_dir


def upgrade_cmd(
    old_root: Annotated[Path, typer.Option("--old-root", help="The upstream tree the config was made for.")],
    new_root: Annotated[Path, typer.Option("--new-root", help="The upstream tree to move the config to.")],
    config: Annotated[Path, typer.Option("--config", help="The old tree's configs directory.")],
    out: Annotated[Path, typer.Option("--out", help="Output folder: configs/, upgrade.md/.json (and report.md).")],
    backend: Annotated[Path, typer.Option("--backend", help="The backend profile (backend.yaml).")],
    brain: Annotated[str, typer.Option("--brain", help="offline (default, no network) or llm (needs OPENAI_BASE_URL).")] = "offline",
    execute: Annotated[bool, typer.Option("--execute/--no-execute", help="Run the delta's tests on the device and refine.")] = True,
    state_dir: Annotated[Path | None, typer.Option("--state-dir", help="Memory, caches and checkpoints (default .testcurator/).")] = None,
    workers: Annotated[int, typer.Option("-n", "--workers", min=1, help="pytest-xdist workers for test runs.")] = 1,
    timeout: Annotated[float, typer.Option("--timeout", min=1, help="Seconds before a hanging test is killed.")] = 300.0,
    retries: Annotated[int, typer.Option("--retries", min=0, help="Reruns of failing tests (flaky vs consistent).")] = 1,
    embed: Annotated[bool, typer.Option("--embed/--no-embed", help="Per-test embeddings (similar tests).")] = True,
    capture_ops: Annotated[bool, typer.Option("--capture-ops/--no-capture-ops", help="Run the delta once on CPU to map it to aten ops.")] = True,
    llm_base_url: Annotated[str | None, typer.Option("--llm-base-url", help="OpenAI-compatible endpoint (else OPENAI_BASE_URL).")] = None,
    llm_model: Annotated[str | None, typer.Option("--llm-model", help="Model name (else TESTCURATOR_LLM_MODEL).")] = None,
) -> None:
    """Move a config to a new upstream tree: re-evaluate only added and changed tests, carry the rest."""
    from testcurator.pipelines.context import RunContext
    from testcurator.pipelines.upgrade import UpgradeOptions, run_upgrade

    console = Console(highlight=False)
    run = RunContext.create(torch_root=new_root, backend=backend, out_dir=out, state_dir=resolve_state_dir(state_dir),
                            brain=brain, llm_base_url=llm_base_url, llm_model=llm_model, execute=execute,
                            workers=workers, timeout=timeout, retries=retries, embed=embed, capture_ops=capture_ops,
                            say=lambda message: console.print(message, markup=False))
    data = run_upgrade(UpgradeOptions(old_root=old_root, config=config, run=run))
    console.print(f"done: {data['evaluated']}; configs in {out / 'configs'}", markup=False)


def enable_op_cmd(
    op: Annotated[str, typer.Argument(help="The op now supported: an OpInfo name (add) or an ATen op (aten::add).")],
    config: Annotated[Path, typer.Option("--config", help="The configs directory to change in place.")],
    torch_root: Annotated[Path | None, typer.Option("--torch-root", help="Upstream tree (default: the memory's).")] = None,
    backend: Annotated[Path | None, typer.Option("--backend", help="The backend profile (needed for --execute).")] = None,
    execute: Annotated[bool, typer.Option("--execute/--no-execute", help="Run the admitted tests on the device; keep what passes.")] = False,
    state_dir: Annotated[Path | None, typer.Option("--state-dir", help="Memory and op map (default .testcurator/).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the delta, change nothing.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", min=1, help="Seconds before a hanging test is killed.")] = 300.0,
) -> None:
    """Admit the tests held back only by OP: a config delta; with --execute, validated on the device."""
    from testcurator.pipelines.enable_op import EnableOptions, enable_op

    console = Console(highlight=False)
    result = enable_op(EnableOptions(op=op, config=config, state_dir=resolve_state_dir(state_dir),
                                     torch_root=torch_root, backend=backend, execute=execute, dry_run=dry_run,
                                     timeout=timeout), lambda message: console.print(message, markup=False))
    console.print(result.summary(), markup=False)


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command("upgrade")(upgrade_cmd)
    app.command("enable-op")(enable_op_cmd)
