"""The ``testcurator`` command: a thin layer over the Python API.

Each command group lives in its own module and registers itself here explicitly; every
option comes from :mod:`testcurator.cli.options`. Exit codes: errors derived from
:class:`testcurator.errors.CuratorError` carry their own (2 for bad input); a usage error
(unknown option, missing argument, a value out of bounds) prints what was wrong and the
usage line, and exits 2; anything else is a bug and keeps its traceback.

typer (from 0.26) vendors its own copy of click, so click's exception classes are not the
ones raised: :mod:`testcurator.cli.commands` takes them from ``typer.BadParameter``'s
ancestry instead, which holds for every typer release this package accepts.
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any


def _interrupted_at_start(signum: int, frame: Any) -> None:
    sys.stderr.write("interrupted (exit 130)\n")
    raise SystemExit(130)


# An interrupt while the commands are still being imported ends in one line, not a traceback.
_SIGINT_AT_START = signal.getsignal(signal.SIGINT)
if _SIGINT_AT_START is signal.default_int_handler:
    signal.signal(signal.SIGINT, _interrupted_at_start)

import typer
from rich.console import Console

from testcurator.cli.commands import ClickError, TerminateSignal, UsageError, new_group, record_invocation
from testcurator.cli.options import Version
from testcurator.errors import ConfigError, CuratorError, Interrupted, Terminated


app = new_group("testcurator", "Curate PyTorch's upstream test suite for an out-of-tree backend.", completion=True)


@app.callback()
def _root(version: Version = False) -> None:
    # --version is handled by its option's check (it prints and exits); nothing else to do here.
    del version
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def _register_groups() -> None:
    # Explicit registry: a newcomer reads here which module owns which command.
    from testcurator.cli.groups import ci as ci_cmds
    from testcurator.cli.groups import config as config_cmds
    from testcurator.cli.groups import durations as durations_cmds
    from testcurator.cli.groups import eval as eval_cmds
    from testcurator.cli.groups import exec as exec_cmds
    from testcurator.cli.groups import importing as import_cmds
    from testcurator.cli.groups import llm as llm_cmds
    from testcurator.cli.groups import memory as memory_cmds
    from testcurator.cli.groups import nights as nights_cmds
    from testcurator.cli.groups import ops as ops_cmds
    from testcurator.cli.groups import probe as probe_cmds
    from testcurator.cli.groups import profile as profile_cmds
    from testcurator.cli.groups import report as report_cmds
    from testcurator.cli.groups import review as review_cmds
    from testcurator.cli.groups import run as run_cmds
    from testcurator.cli.groups import shards as shards_cmds
    from testcurator.cli.groups import tiers as tiers_cmds
    from testcurator.cli.groups import upgrade as upgrade_cmds

    for module in (config_cmds, profile_cmds, memory_cmds, ops_cmds, probe_cmds, exec_cmds, run_cmds, nights_cmds,
                   report_cmds, review_cmds, import_cmds, upgrade_cmds, eval_cmds, llm_cmds, durations_cmds, shards_cmds, tiers_cmds,
                   ci_cmds):
        module.register(app)


_register_groups()


def report_error(exc: CuratorError) -> None:
    """Print an error the way every command does: one line per problem, on stderr."""
    if isinstance(exc, ConfigError):
        for problem in exc.problems:
            err_console.print(str(problem), markup=False)
        err_console.print(f"{len(exc.problems)} problem(s) found", markup=False)
    elif isinstance(exc, Interrupted):
        err_console.print(str(exc), markup=False)
    else:
        err_console.print(f"error: {exc}", markup=False)


def usage_line(ctx: Any) -> str:
    """``usage: testcurator validate [OPTIONS] PATH...`` on one line, whatever the width."""
    pieces = ctx.command.collect_usage_pieces(ctx)
    return f"usage: {ctx.command_path} {' '.join(pieces)}  (--help for details)"


def _context_for(argv: list[str]) -> Any:
    """The context of the (sub)command ``argv`` names, for errors raised without one."""
    root = typer.main.get_command(app)
    ctx = typer.Context(root, info_name="testcurator")
    for token in argv:
        commands = getattr(ctx.command, "commands", None)
        if not commands or token not in commands:
            if token.startswith("-") or not commands:
                continue
            break
        ctx = typer.Context(commands[token], info_name=token, parent=ctx)
    return ctx


def report_usage_error(exc: Exception, argv: list[str]) -> int:
    """What was wrong, then the usage line: two lines on stderr; exit code 2 (click's own)."""
    ctx = getattr(exc, "ctx", None) or _context_for(argv)
    if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
        typer.echo(ctx.get_help())  # a group or command run bare: its help, as click does
        return 2
    message = " ".join(str(exc.format_message()).split())  # type: ignore[attr-defined]
    err_console.print(f"error: {message}", markup=False)
    if ctx is not None:
        err_console.print(usage_line(ctx), markup=False)
    return int(getattr(exc, "exit_code", 2) or 2)


def _terminate(signum: int, frame: Any) -> None:
    raise TerminateSignal


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    if signal.getsignal(signal.SIGINT) is _interrupted_at_start:
        signal.signal(signal.SIGINT, _SIGINT_AT_START)  # started: Ctrl-C is a KeyboardInterrupt again
    # SIGTERM stops the command as Ctrl-C does (its pytest sessions with it), where nobody else
    # handles it; the handler is put back on return (main also runs inside other programs).
    previous = signal.getsignal(signal.SIGTERM)
    own = previous == signal.SIG_DFL and threading.current_thread() is threading.main_thread()
    if own:
        signal.signal(signal.SIGTERM, _terminate)
    try:
        return _main(argv)
    finally:
        if own:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None) -> int:
    record_invocation(sys.argv[1:] if argv is None else list(argv))
    try:
        # standalone_mode=False: errors come here instead of typer's boxed, multi-line report.
        result = app(args=argv, prog_name="testcurator", standalone_mode=False)
    except CuratorError as exc:
        report_error(exc)
        return exc.exit_code
    except UsageError as exc:
        return report_usage_error(exc, sys.argv[1:] if argv is None else argv)
    except ClickError as exc:  # e.g. a file that cannot be opened: one line, click's exit code
        err_console.print(f"error: {' '.join(str(exc.format_message()).split())}", markup=False)  # type: ignore[attr-defined]
        return int(getattr(exc, "exit_code", 1))
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except TerminateSignal:  # outside a command's invoke (while typer parses): the same line and code
        terminated = Terminated()
        report_error(terminated)
        return terminated.exit_code
    except (typer.Abort, KeyboardInterrupt):
        err_console.print("interrupted (exit 130)", markup=False)
        return 130
    return result if isinstance(result, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
