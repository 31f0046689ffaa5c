"""`testcurator ci github`: write the GitHub Actions workflow for a backend (seed 003)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from testcurator.cli.commands import command, new_group
from testcurator.cli.options import (BackendReq, Branches, ConfigDir, Cron, DispatchLabels, EventType, Label, OutTarget,
                                     Requirement, RunsOn, ScheduleLabels, Shards)
from testcurator.errors import BadInputError

console = Console(highlight=False, soft_wrap=True)
app = new_group("ci", "Generate CI that runs the curated suite as a sharded matrix.")


@command(app, "github")
def github_cmd(
    backend: BackendReq,
    shards: Shards,
    out: OutTarget = Path(".github/workflows/testcurator.yml"),
    config_dir: ConfigDir = "configs",
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

    Each of the --shards matrix legs runs `exec --shard K/N`.
    """
    from testcurator.config.profile import load_profile
    from testcurator.files import atomic_write_text
    from testcurator.pipelines.ci_github import WorkflowOptions, render_github_workflow

    profile, _ = load_profile(backend, check_paths=False)
    opts = WorkflowOptions(shards=shards, config_dir=config_dir, profile_path=_in_repository(backend),
                           runs_on=tuple(runs_on or ()), event_type=event_type,
                           branches=branches, label=label, cron=cron, testcurator_requirement=requirement,
                           dispatch_labels=dispatch_labels, schedule_labels=schedule_labels)
    atomic_write_text(out, render_github_workflow(profile, opts))
    console.print(f"wrote {out}: {shards} shard(s) on {', '.join(runs_on or ['self-hosted', profile.device.torch_name])}",
                  markup=False)


def _in_repository(profile: Path) -> str:
    """The profile's path from the root of the git repository that holds it (the backend
    repository the workflow checks out), or from the current directory outside git."""
    path = profile.resolve()
    root = next((p for p in path.parents if (p / ".git").exists()), Path.cwd().resolve())
    if not path.is_relative_to(root):
        raise BadInputError(f"--backend {profile}: not inside the backend repository {root}; the workflow checks out "
                            "that repository and needs the profile in it")
    return path.relative_to(root).as_posix()


def register(root: typer.Typer) -> None:
    """Add the `ci` group to ``root``."""
    root.add_typer(app, name="ci")
