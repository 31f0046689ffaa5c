"""`testcurator shards plan`: seed 003's three levels as a list of jobs (or a CI matrix).

Each job is ``exec --config DIR --group GROUP --shard K/N``: the feature group narrows
the config's files, the shard count of a group follows ``--max-job-s``, and the split
inside the group is balanced by duration at collection.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

console = Console(highlight=False, soft_wrap=True)
app = typer.Typer(help="Plan shards by feature group and duration.", no_args_is_help=True)


@app.command("plan")
def plan_cmd(
    config: Annotated[Path, typer.Option("--config", help="config file or directory")],
    max_job_s: Annotated[float, typer.Option("--max-job-s", min=1, help="longest expected time of one job, in seconds")] = 1800.0,
    torch_root: Annotated[Optional[Path], typer.Option("--torch-root", envvar="TORCH_ROOT", help="value of ${TORCH_ROOT}")] = None,
    durations: Annotated[Optional[Path], typer.Option("--durations", help="a .test_durations file instead of the state dir's")] = None,
    device: Annotated[Optional[str], typer.Option("--device", help="plan with this device's timings where known")] = None,
    state_dir: Annotated[Optional[Path], typer.Option("--state-dir", help="where durations are kept")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print a GitHub Actions matrix ({include: [...]})")] = False,
) -> None:
    """Jobs per feature group, as many per group as --max-job-s needs."""
    from testcurator.errors import MissingPathError
    from testcurator.memory.paths import resolve_state_dir
    from testcurator.pipelines.shard_plan import config_files, plan_jobs
    from testcurator.runner.durations import DurationStore
    from testcurator.sharding import read_test_durations

    if not config.exists():
        raise MissingPathError(config, "--config")
    if durations is not None:
        known = read_test_durations(durations)
    else:
        with DurationStore(resolve_state_dir(state_dir)) as store:
            known = store.known_for(device)
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
    root.add_typer(app, name="shards")
