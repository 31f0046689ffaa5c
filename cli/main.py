"""The ``testcurator`` command: a thin layer over the Python API.

Each command group lives in its own module and registers itself here explicitly.
Errors derived from :class:`testcurator.errors.CuratorError` map to exit codes
(2 for bad input); anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from testcurator.errors import ConfigError, CuratorError

app = typer.Typer(
    name="testcurator",
    help="Curate PyTorch's upstream test suite for an out-of-tree backend.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def _register_groups() -> None:
    # Explicit registry: a newcomer reads here which module owns which command.
    from testcurator.cli import (config_cmds, eval_cmds, exec_cmds, import_cmds, llm_cmds, memory_cmds, ops_cmds,
                                 review_cmds, run_cmds, upgrade_cmds)

    for module in (config_cmds, memory_cmds, ops_cmds, exec_cmds, run_cmds, review_cmds, import_cmds, upgrade_cmds,
                   eval_cmds, llm_cmds):
        module.register(app)


_register_groups()


def report_error(exc: CuratorError) -> None:
    """Print an error the way every command does: one line per problem, on stderr."""
    if isinstance(exc, ConfigError):
        for problem in exc.problems:
            err_console.print(str(problem), markup=False)
        err_console.print(f"{len(exc.problems)} problem(s) found", markup=False)
    else:
        err_console.print(f"error: {exc}", markup=False)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    try:
        # With standalone_mode=False click returns a command's typer.Exit code instead of exiting.
        result = app(args=argv, standalone_mode=False)
    except CuratorError as exc:
        report_error(exc)
        return exc.exit_code
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except SystemExit as exc:  # click's own usage errors
        return int(exc.code or 0)
    except Exception as exc:  # click.ClickException and friends (bad option values)
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            return exc.exit_code
        if isinstance(exc, click.exceptions.Abort):
            return 130
        raise
    return result if isinstance(result, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
