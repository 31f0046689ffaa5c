"""`testcurator shards plan`: seed 003's three levels as a list of jobs (or a CI matrix).

Each job is ``exec --config DIR --group GROUP --shard K/N``: the feature group narrows
the config's files, the shard count of a group follows ``--max-job-s``, and the split
inside the group is balanced by duration at collection. The plan is made from the config's
durations snapshot (``runner/shards/snapshot.py``), the one every ``exec --shard`` leg of
the config reads: taken here when there is none yet, or with ``--refresh-snapshot``.
"""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from testcurator.cli.commands import command, new_group
from testcurator.cli.options import (ConfigReq, Durations, Format, JsonDeprecated, MaxJobS, RefreshSnapshot, StateDir,
                                     TimingsDevice, TorchRoot, wants_json)

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
    refresh_snapshot: RefreshSnapshot = False,
) -> None:
    """Jobs per feature group, as many per group as --max-job-s needs.

    --format json prints a GitHub Actions matrix ({"include": [{"group", "shard"}, ...]}).
    The durations come from the config's snapshot in --state-dir, which every `exec --shard`
    leg with the same --device reads (taken now if there is none; --refresh-snapshot takes a
    new one).
    """
    as_json = wants_json(fmt, as_json)
    from testcurator.errors import MissingPathError
    from testcurator.memory.paths import resolve_state_dir
    from testcurator.pipelines.shard_plan import config_files, plan_jobs
    from testcurator.runner.shards.durations import DurationStore
    from testcurator.runner.shards.snapshot import current_durations, freeze, snapshot_key
    from testcurator.sharding import read_test_durations

    if not config.exists():
        raise MissingPathError(config, "--config")
    if durations is not None and not durations.is_file():
        raise MissingPathError(durations, "--durations")
    state = resolve_state_dir(state_dir)
    with DurationStore(state) as store:
        # As exec merges them: the file's (non-zero) timings win over the state dir's.
        snapshot = freeze(state, snapshot_key(config, (), device, durations),
                          lambda: current_durations(store, device, durations), refresh=refresh_snapshot)
    jobs = plan_jobs(config_files(config, torch_root), read_test_durations(snapshot.path), max_job_s)
    note = (f"durations snapshot: {snapshot.path} ({'taken now' if snapshot.taken else 'taken before'}; "
            "every `exec --shard` leg of this config reads it; --refresh-snapshot takes a new one)")
    if as_json:
        console.print(json.dumps({"include": [{"group": j.group, "shard": str(j.shard)} for j in jobs]}), markup=False)
        typer.echo(note, err=True)  # stdout is the matrix, nothing else
        return
    table = Table(title=f"{len(jobs)} jobs, at most {max_job_s:.0f} s each")
    for column in ("group", "shard", "files", "expected s"):
        table.add_column(column, justify="right" if column in ("files", "expected s") else "left")
    for job in jobs:
        table.add_row(job.group, str(job.shard), str(len(job.files)), f"{job.expected_s:.1f}")
    console.print(table)
    console.print(note, markup=False)


def register(root: typer.Typer) -> None:
    """Add the `shards` group to ``root``."""
    root.add_typer(app, name="shards")
