"""`testcurator report RUN_DIR`: render a run's report again from its report.json; `testcurator gaps
RUN_DIR`: what to implement next, the device's gaps ranked by the tests they hold back."""

from __future__ import annotations

import typer
from rich.console import Console

from testcurator.cli.commands import command
from testcurator.cli.options import GapsFormat, OutFile, RunDirArg, StateDir


def report_cmd(run_dir: RunDirArg, state_dir: StateDir = None) -> None:
    """Write report.md (and report.json) of a run again from its report.json, as this testcurator renders them.

    RUN_DIR is the run's --out folder, its run folder (<state-dir>/runs/<id>) or 'latest'.
    The command and exit code recorded when the run ended are kept.
    """
    import json

    from testcurator.cli.run_dirs import REPORT_FILE, out_folder
    from testcurator.errors import BadInputError
    from testcurator.memory.paths import resolve_state_dir
    from testcurator.pipelines import report

    out = out_folder(run_dir, resolve_state_dir(state_dir))
    try:
        data = json.loads((out / REPORT_FILE).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise BadInputError(f"{out / REPORT_FILE} is not JSON: {exc}") from None
    try:
        path = report._write(out, data)  # the renderer the run itself used (pipelines/report.py)
    except (KeyError, TypeError) as exc:
        raise BadInputError(f"{out / REPORT_FILE} is not a run report this testcurator reads (missing {exc})") from None
    Console(highlight=False, soft_wrap=True).print(f"wrote {path} and {out / REPORT_FILE}", markup=False)


def gaps_cmd(run_dir: RunDirArg, fmt: GapsFormat = "text", out: OutFile = None, state_dir: StateDir = None) -> None:
    """What to implement next: the device's gaps, ranked by the upstream tests each one holds back.

    A gap is an op at some dtypes (missing kernel, unsupported dtype, crash, wrong result, a view
    returned as a copy, an error), a feature such as DLPack, or a dtype the profile does not
    declare. Per gap: the tests and instances it holds back, the tests it frees alone, those it
    shares with other gaps, and the enable-op command that admits them once it is implemented.
    RUN_DIR is a run folder (<state-dir>/runs/<id>), a run's --out folder or 'latest'.
    """
    from testcurator.cli.run_dirs import run_folder
    from testcurator.files import atomic_write_text
    from testcurator.memory.paths import resolve_state_dir
    from testcurator.pipelines.gaps.files import compute
    from testcurator.pipelines.gaps.render import render

    text = render(compute(run_folder(run_dir, resolve_state_dir(state_dir))), fmt)
    if out is not None:
        atomic_write_text(out, text)
        typer.echo(f"wrote {out}")
    else:
        typer.echo(text, nl=False)


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    command(app, "report")(report_cmd)
    command(app, "gaps")(gaps_cmd)
