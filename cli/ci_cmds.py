"""`testcurator ci github`: write the GitHub Actions workflow for a backend (seed 003)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

console = Console(highlight=False, soft_wrap=True)
app = typer.Typer(help="Generate CI that runs the curated suite as a sharded matrix.", no_args_is_help=True)


@app.command("github")
def github_cmd(
    backend: Annotated[Path, typer.Option("--backend", help="the backend profile (backend.yaml)")],
    shards: Annotated[int, typer.Option("--shards", min=1, help="matrix legs: each runs `exec --shard K/N`")],
    out: Annotated[Path, typer.Option("--out", help="workflow file to write")] = Path(".github/workflows/testcurator.yml"),
    config_dir: Annotated[str, typer.Option("--config-dir", help="the configs, relative to the backend repository")] = "configs",
    runs_on: Annotated[Optional[list[str]], typer.Option("--runs-on", help="runner labels of a device host (repeatable; default: self-hosted + the device)")] = None,
    event_type: Annotated[str, typer.Option("--event-type", help="repository_dispatch type the relay sends")] = "pytorch-pr",
    branches: Annotated[str, typer.Option("--branches", help="base branches to test (regular expression)")] = "main|release/.+",
    label: Annotated[str, typer.Option("--label", help="PR label required ('' for none); waited for, since it may land after the dispatch")] = "Merged",
    cron: Annotated[str, typer.Option("--cron", help="nightly schedule (UTC)")] = "0 4 * * *",
    requirement: Annotated[str, typer.Option("--testcurator", help="pip requirement that installs testcurator on runners")] = "testcurator",
) -> None:
    """Write a workflow: gate the relay's dispatch, nightly and releases; build once; one leg per shard; merge."""
    from testcurator.config.profile import load_profile
    from testcurator.files import atomic_write_text
    from testcurator.pipelines.ci_github import WorkflowOptions, render_github_workflow

    profile, _ = load_profile(backend, check_paths=False)
    opts = WorkflowOptions(shards=shards, config_dir=config_dir, runs_on=tuple(runs_on or ()), event_type=event_type,
                           branches=branches, label=label, cron=cron, testcurator_requirement=requirement)
    atomic_write_text(out, render_github_workflow(profile, opts))
    console.print(f"wrote {out}: {shards} shard(s) on {', '.join(runs_on or ['self-hosted', profile.device.torch_name])}",
                  markup=False)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="ci")
