"""`testcurator review OLD NEW`: what changed between two configs, for a reviewer.

Exit codes: 0 reviewed; 1 ``--fail-if-mandatory-shrinks-by`` was exceeded (the report is
still written); 2 bad input (a side that does not exist or does not load).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from testcurator.config.review import review_paths, shrink_exceeds
from testcurator.config.review_render import FORMATS, render, render_terminal
from testcurator.errors import BadInputError, CuratorError
from testcurator.files import atomic_write_text


def review_cmd(
    old: Annotated[str, typer.Argument(help="Old config: a file, a directory, or REV:PATH (git, e.g. HEAD~1:configs/).")],
    new: Annotated[str, typer.Argument(help="New config: same forms as OLD.")],
    fmt: Annotated[str, typer.Option("--format", help=f"One of: {', '.join(FORMATS)}.")] = "terminal",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write here (atomically) instead of stdout.")] = None,
    repo: Annotated[Optional[Path], typer.Option("--repo", help="Git repository for REV:PATH sides (default: cwd).")] = None,
    fail_shrink: Annotated[
        Optional[str],
        typer.Option("--fail-if-mandatory-shrinks-by", metavar="N|P%",
                     help="Exit 1 when more than N (or P% of the) named mandatory_success tests lose that mode."),
    ] = None,
) -> None:
    """Diff two configs per upstream file and test: mode, edits and reason, with evidence."""
    if fmt not in FORMATS:
        raise BadInputError(f"unknown --format {fmt!r} (expected one of {', '.join(FORMATS)})")
    report = review_paths(old, new, repo)
    failure = shrink_exceeds(report, fail_shrink) if fail_shrink else None
    if output is not None:
        atomic_write_text(output, render(report, fmt))
        typer.echo(f"wrote {output}")
    elif fmt == "terminal":
        render_terminal(report, Console(highlight=False))
    else:
        typer.echo(render(report, fmt), nl=False)
    if failure is not None:
        # A gate failure, not bad input: CuratorError's exit code 1 (printed as "error: ...").
        raise CuratorError(f"review gate: {failure}")


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command("review")(review_cmd)
