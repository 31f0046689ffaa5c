"""`testcurator history` and `testcurator accept`: night after night, what ran and what waits.

``history`` reads the memory of runs (``<state-dir>/history.sqlite``); ``accept`` writes the
changes a night kept back for review (a regression's demotion or new exclusion) into the
configs of its ``--out``, holding the run lock as ``run`` does.
"""

from __future__ import annotations

import json

import typer

from testcurator.cli.commands import command, invocation
from testcurator.cli.options import (AcceptTests, Format, HistoryFile, HistoryTest, LastRuns, OutRuns, OutRunsReq,
                                     StateDir, Wait)
from testcurator.memory.paths import resolve_state_dir


def history_cmd(out: OutRuns = None, state_dir: StateDir = None, file: HistoryFile = None, test: HistoryTest = None,
                last: LastRuns = None, fmt: Format = "text") -> None:
    """The runs recorded in the state directory (of --out), oldest first: identity, exit code and the curated
    suite's passing, held-back and failing instances; --file and --test add one file's counts and one test's
    outcome per run. The chart of the same is <out>/history.html, written by every run."""
    from testcurator.memory.history import HISTORY_DB, History
    from testcurator.pipelines.nights.browse import overview, text
    from testcurator.errors import BadInputError

    state = resolve_state_dir(state_dir)
    if not (state / HISTORY_DB).is_file():
        raise BadInputError(f"no history of runs in {state} (no {HISTORY_DB}): `testcurator run` records every run; "
                            "give the --state-dir it used")
    with History(state) as history:
        data = overview(history, str(out) if out else None, file=file, test=test, last=last)
    typer.echo(json.dumps(data, indent=1) if fmt == "json" else "\n".join(text(data)))


def accept_cmd(out: OutRunsReq, tests: AcceptTests = None, state_dir: StateDir = None, wait: Wait = 0.0) -> None:
    """Write the changes the last run of --out kept back for review (demotions and exclusions of tests that
    regressed, or flaky ones) into its configs, each reason saying it was accepted; NAME... accepts only those.
    Exit 2 when there is no such run or a NAME was not kept back."""
    from testcurator.lock import hold, run_locks
    from testcurator.pipelines.nights.accept import accept, run_of

    state = resolve_state_dir(state_dir)
    run_dir = run_of(state, out)  # bad input before anything is written (the lock files)
    with hold(run_locks(state, out), invocation(), wait_s=wait, say=typer.echo):
        result = accept(run_dir, tests or ())
    for path in result.written:
        typer.echo(f"wrote {out / 'configs' / path}")
    for name in result.kept_human:
        typer.echo(f"kept: {name}: a person edited its entry since; their edit stands")
    if not result.written and not result.kept_human:
        typer.echo("nothing to write: no change was kept back, or it is written already")


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    command(app, "history")(history_cmd)
    command(app, "accept")(accept_cmd)
