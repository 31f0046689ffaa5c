"""How a command or a command group is declared, so that every one behaves alike.

Command modules create groups with :func:`new_group` and add commands with
:func:`command`; both use the classes below, which write help and usage lines themselves
from the parameters' declared placeholders (``PATH...``, ``-n, --workers N``), so that no
type placeholder (``<bool>``, ``<list[Path]>``, ``{paths}``) reaches the user and the help
reads the same whatever typer release is installed. Options come from
:mod:`testcurator.cli.options`.
"""

from __future__ import annotations

import inspect
import shlex
import textwrap
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup


def _ancestor(cls: type, name: str) -> type[Exception]:
    return next(c for c in cls.__mro__ if c.__name__ == name)


#: click's (vendored by typer >= 0.26, or not) base of the errors it reports to the user, and
#: of usage errors: taken from typer.BadParameter's ancestry, which every release exports.
ClickError = _ancestor(typer.BadParameter, "ClickException")
UsageError = _ancestor(typer.BadParameter, "UsageError")


_ARGV: list[str] = []


def record_invocation(argv: list[str]) -> None:
    """Remember the command line being run (``main`` calls this), for reports that record it."""
    _ARGV[:] = argv


def invocation() -> str:
    """The command line being run, as a shell takes it back."""
    return shlex.join(["testcurator", *_ARGV])


def usage_error(message: str) -> Exception:
    """A usage error raised from a command's body (printed with the usage line, exit 2)."""
    return UsageError(message)


def _first_paragraph(text: str | None) -> str:
    return " ".join(inspect.cleandoc(text or "").split("\n\n")[0].split())


def bound(param: Any, name: str) -> Any:
    # typer >= 0.26 keeps min/max on the parameter; older releases on click's range type.
    value = getattr(param, name, None)
    return value if value is not None else getattr(getattr(param, "type", None), name, None)


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def option_extras(param: Any) -> list[str]:
    """``default: 1``, ``min 0``, ``env: TORCH_ROOT``, ``required``: what the help adds in brackets."""
    extras = []
    default = param.default
    if param.required:
        extras.append("required")
    elif getattr(param, "secondary_opts", None) and isinstance(default, bool):
        extras.append(f"default: {param.opts[0] if default else param.secondary_opts[0]}")
    elif default not in (None, False, (), []) and not callable(default):
        extras.append(f"default: {_number(default)}")
    for name, word in (("min", "min"), ("max", "max")):
        value = bound(param, name)
        if value is not None:
            extras.append(f"{word} {_number(value)}")
    if param.envvar:
        extras.append(f"env: ${param.envvar}")
    return extras


def help_rows(ctx: Any, command: Any) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(arguments, options) as (name column, help column) rows."""
    args, opts = [], []
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        if param.param_type_name == "argument":
            args.append((param.metavar or param.name.upper(), param.help or ""))
            continue
        names = ", ".join(param.opts)
        if param.secondary_opts:
            names += " / " + ", ".join(param.secondary_opts)
        if param.metavar:
            names += f" {param.metavar}"
        extras = option_extras(param)
        opts.append((names, (param.help or "") + (f"  [{'; '.join(extras)}]" if extras else "")))
    return args, opts


def write_rows(formatter: Any, rows: list[tuple[str, str]], max_first: int = 30) -> None:
    """Two columns like click's ``write_dl``, but never breaking a word or an option at a hyphen."""
    first = min(max(len(name) for name, _ in rows), max_first)
    indent = " " * formatter.current_indent
    width = max(formatter.width - formatter.current_indent - first - 2, 20)
    for name, text in rows:
        lines = textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False) or [""]
        if len(name) > first:
            formatter.write(f"{indent}{name}\n")
            head = ""
        else:
            head = lines.pop(0)
        if head or len(name) <= first:
            formatter.write(f"{indent}{name:<{first}}  {head}".rstrip() + "\n")
        for line in lines:
            formatter.write(f"{indent}{'':<{first}}  {line}\n")


class _PlainHelp:
    """Usage and help written from the declared placeholders (see the module docstring)."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.metavar = ""
        return option

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = ["[OPTIONS]"]
        for param in self.get_params(ctx):  # type: ignore[attr-defined]
            if param.param_type_name == "argument":
                pieces.append(param.metavar or param.name.upper())
        if isinstance(self, TyperGroup):
            pieces.append("COMMAND [ARGS]...")
        return pieces

    def format_help(self, ctx: Any, formatter: Any) -> None:
        formatter.write_usage(ctx.command_path, " ".join(self.collect_usage_pieces(ctx)))
        text = inspect.cleandoc(getattr(self, "help", None) or "")
        width = max(formatter.width - formatter.current_indent - 2, 20)
        for paragraph in text.split("\n\n") if text else ():
            formatter.write_paragraph()
            for line in textwrap.wrap(" ".join(paragraph.split()), width, break_on_hyphens=False, break_long_words=False):
                formatter.write(f"{' ' * (formatter.current_indent + 2)}{line}\n")
        args, opts = help_rows(ctx, self)
        for title, rows in (("Arguments", args), ("Options", opts), ("Commands", self._command_rows(ctx))):
            if rows:
                with formatter.section(title):
                    write_rows(formatter, rows)

    def _command_rows(self, ctx: Any) -> list[tuple[str, str]]:
        if not isinstance(self, TyperGroup):
            return []
        rows = []
        for name in self.list_commands(ctx):
            sub = self.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                rows.append((name, _first_paragraph(sub.short_help or sub.help)))
        return rows


class Command(_PlainHelp, TyperCommand):
    pass


class TerminateSignal(KeyboardInterrupt):
    """SIGTERM, raised where the command is (cli/main.py): a KeyboardInterrupt, so every
    ``except BaseException`` that stops a pytest session on the way out stops it for SIGTERM too
    (without it the run died at once and its pytest sessions, each in a session of its own,
    ran on)."""


class Group(_PlainHelp, TyperGroup):
    def invoke(self, ctx: Any) -> Any:
        # typer turns an interrupt into a silent exit 130; ours says so (cli/main.py prints it).
        try:
            return super().invoke(ctx)
        except TerminateSignal:
            from testcurator.errors import Terminated

            raise Terminated() from None
        except KeyboardInterrupt:
            from testcurator.errors import Interrupted

            raise Interrupted("interrupted (exit 130)") from None


def new_group(name: str | None, help: str, *, completion: bool = False) -> typer.Typer:
    """A command group with testcurator's conventions (plain help); ``completion``: the root's
    ``--install-completion``/``--show-completion`` options."""
    return typer.Typer(name=name, help=help, no_args_is_help=True, add_completion=completion, cls=Group,
                       pretty_exceptions_enable=False, rich_markup_mode=None)


def command(app: typer.Typer, name: str) -> Any:
    """``app.command(name)`` with testcurator's command class."""
    return app.command(name, cls=Command)
