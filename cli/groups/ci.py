"""`testcurator ci github`: write the GitHub Actions workflow for a backend (seed 003)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from testcurator.cli.commands import command, new_group
from testcurator.cli.options import (BackendReq, Branches, Config, Cron, DispatchLabels, EventType, Label, WorkflowOut,
                                     Requirement, RunsOn, ScheduleLabels, Shards)
from testcurator.errors import BadInputError

console = Console(highlight=False, soft_wrap=True)
app = new_group("ci", "Generate CI that runs the curated suite as a sharded matrix.")


@command(app, "github")
def github_cmd(
    backend: BackendReq,
    shards: Shards,
    out: WorkflowOut = Path(".github/workflows/testcurator.yml"),
    config: Config = None,
    runs_on: RunsOn = None,
    event_type: EventType = "pytorch-pr",
    branches: Branches = "main|release/.+",
    label: Label = "Merged",
    cron: Cron = "0 4 * * *",
    requirement: Requirement = "testcurator",
    dispatch_labels: DispatchLabels = "",
    schedule_labels: ScheduleLabels = "",
) -> None:
    """Write a workflow: gate the relay's dispatch, nightly and releases; build once; one leg per shard; merge.

    Each of the --shards matrix legs runs `exec --shard K/N` on --config: the configs' folder
    inside the backend repository (default: configs).
    """
    from testcurator.config.profile import load_profile
    from testcurator.files import atomic_write_text
    from testcurator.pipelines.ci_github import WorkflowOptions, render_github_workflow

    profile, _ = load_profile(backend, check_paths=False)
    root = _repository(backend)
    opts = WorkflowOptions(shards=shards, config_dir=_inside(config, root, "--config") if config else "configs",
                           profile_path=_inside(backend, root, "--backend"),
                           runs_on=tuple(runs_on or ()), event_type=event_type,
                           branches=branches, label=label, cron=cron, testcurator_requirement=requirement,
                           dispatch_labels=dispatch_labels, schedule_labels=schedule_labels)
    if not out.parent.is_dir():
        console.print(f"made folder {out.parent}", markup=False)
    atomic_write_text(out, render_github_workflow(profile, opts))
    console.print(f"wrote {out}: {shards} shard(s) on {', '.join(runs_on or ['self-hosted', profile.device.torch_name])}",
                  markup=False)


def _repository(profile: Path) -> Path:
    """The root of the git repository that holds the profile (the backend repository the
    workflow checks out), or the current directory outside git."""
    path = profile.resolve()
    return next((p for p in path.parents if (p / ".git").exists()), Path.cwd().resolve())


def _inside(path: Path, root: Path, option: str) -> str:
    """``path`` from the repository root: the workflow checks that repository out."""
    full = path.resolve()
    if not full.is_relative_to(root):
        raise BadInputError(f"{option} {path}: not inside the backend repository {root}; the workflow checks out "
                            "that repository and needs it there")
    return full.relative_to(root).as_posix()


def register(root: typer.Typer) -> None:
    """Add the `ci` group to ``root``."""
    root.add_typer(app, name="ci")
