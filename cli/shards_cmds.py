"""`testcurator shards plan`: seed 003's three levels as a list of jobs (or a CI matrix).

Each job is ``exec --config DIR --group GROUP --shard K/N``: the feature group narrows
the config's files, the shard count of a group follows ``--max-job-s``, and the split
inside the group is balanced by duration at collection.
"""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from testcurator.cli.commands import command, new_group
from testcurator.cli.options import (ConfigReq, Durations, Format, JsonDeprecated, MaxJobS, StateDir, TimingsDevice, TorchRoot,
                                     wants_json)

console = Console(highlight=False, soft_wrap=True)
app = new_group("shards", "Plan shards by feature group and duration.")


@command(app, "plan")
def plan_cmd(
    config: ConfigReq,
    max_job_s: MaxJobS = 1800.0,
    torch_root: TorchRoot = None,
    durations: Durations = None,
    device: TimingsDevice = None,
    state_dir: StateDir = None,
    fmt: Format = "text",
    as_json: JsonDeprecated = False,
) -> None:
    """Jobs per feature group, as many per group as --max-job-s needs.

    --format json prints a GitHub Actions matrix ({"include": [{"group", "shard"}, ...]}).
    """
    as_json = wants_json(fmt, as_json)
    from testcurator.errors import MissingPathError
    from testcurator.memory.paths import resolve_state_dir
    from testcurator.pipelines.shard_plan import config_files, plan_jobs
    from testcurator.runner.durations import DurationStore
    from testcurator.sharding import read_test_durations

    if not config.exists():
        raise MissingPathError(config, "--config")
    with DurationStore(resolve_state_dir(state_dir)) as store:
        known = store.known_for(device)
    if durations is not None:  # as exec merges it: the file's (non-zero) timings win over the state dir's
        known.update({nodeid: s for nodeid, s in read_test_durations(durations).items() if s > 0})
    jobs = plan_jobs(config_files(config, torch_root), known, max_job_s)
    if as_json:
        console.print(json.dumps({"include": [{"group": j.group, "shard": str(j.shard)} for j in jobs]}), markup=False)
        return
    table = Table(title=f"{len(jobs)} jobs, at most {max_job_s:.0f} s each")
    for column in ("group", "shard", "files", "expected s"):
        table.add_column(column, justify="right" if column in ("files", "expected s") else "left")
    for job in jobs:
        table.add_row(job.group, str(job.shard), str(len(job.files)), f"{job.expected_s:.1f}")
    console.print(table)


def register(root: typer.Typer) -> None:
    """Add the `shards` group to ``root``."""
    root.add_typer(app, name="shards")
