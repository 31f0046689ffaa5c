"""`testcurator review OLD NEW`: what changed between two configs, for a reviewer.

Exit codes: 0 reviewed; 1 ``--fail-if-mandatory-shrinks-by`` was exceeded (the report is
still written); 2 bad input (a side that does not exist or does not load).
"""

from __future__ import annotations

import typer
from rich.console import Console

from testcurator.cli.commands import command
from testcurator.cli.options import FailShrink, NewSide, OldSide, OutFile, OutputDeprecated, Repo, ReviewFormat, take_deprecated
from testcurator.config.review import ReviewReport, review_paths, shrink_exceeds
from testcurator.config.review_render import render, render_terminal
from testcurator.errors import CuratorError
from testcurator.files import atomic_write_text


def review_cmd(
    old: OldSide,
    new: NewSide,
    fmt: ReviewFormat = "terminal",
    out: OutFile = None,
    repo: Repo = None,
    fail_shrink: FailShrink = None,
    output: OutputDeprecated = None,
) -> None:
    """Diff two configs per upstream file and test: mode, edits and reason, with evidence."""
    out = take_deprecated(out, output, "-o/--output", "--out")
    report = _with_causes(review_paths(old, new, repo), new)
    failure = shrink_exceeds(report, fail_shrink) if fail_shrink else None
    if out is not None:
        atomic_write_text(out, render(report, fmt))
        typer.echo(f"wrote {out}")
    elif fmt == "terminal":
        render_terminal(report, Console(highlight=False))
    else:
        typer.echo(render(report, fmt), nl=False)
    if failure is not None:
        # A gate failure, not bad input: CuratorError's exit code 1 (printed as "error: ...").
        raise CuratorError(f"review gate: {failure}")


def _with_causes(report: ReviewReport, new: str) -> ReviewReport:
    """The report with each change's cause, when NEW is a run's configs folder whose report.json
    (beside it) says what changed since the run before (pipelines/nights/since.py)."""
    import dataclasses
    import json
    from pathlib import Path

    from testcurator.config.review import changed_tests
    from testcurator.pipelines.nights.since import causes_for

    beside = Path(new).parent / "report.json"
    if not Path(new).is_dir() or not beside.is_file():
        return report
    causes = causes_for(json.loads(beside.read_text(encoding="utf-8")), changed_tests(report))
    return dataclasses.replace(report, causes=tuple(sorted(causes.items())))


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    command(app, "review")(review_cmd)
