"""`testcurator validate` and `testcurator schema`."""

from __future__ import annotations

import json

import typer
from rich.console import Console

from testcurator.cli.commands import command
from testcurator.cli.options import AllowOutsideRoot, ConfigPaths, Level, TorchRoot
from testcurator.config.levels import level2_problems
from testcurator.config.loader import config_files, validate
from testcurator.config.schema import json_schema
from testcurator.errors import ConfigError


def validate_cmd(paths: ConfigPaths, torch_root: TorchRoot = None, allow_outside_root: AllowOutsideRoot = False,
                 level: Level = 1) -> None:
    """Check configs: exit 0 when valid, else exit 2 with one `file:line:col: message` per problem.

    Level 1: schema, syntax, test paths (Python test files inside the torch root; instantiated
    names get the generic name to write instead). Level 2 also reads the upstream files
    (never imports them): stale entries (names no file defines), ops/modules edits on tests
    without @ops/@modules, excluded dtypes the test never has. Level 3 also collects the
    files with pytest (no execution): files that do not collect, instantiated names.
    """
    root = torch_root.resolve() if torch_root else None
    console = Console(highlight=False, soft_wrap=True)  # node ids, paths and Markdown rows stay whole
    notes: list[str] = []
    if level >= 3:
        from testcurator.pipelines.validate_tree import level3  # imports the runner: only when asked

        result = level3(paths, torch_root=root, allow_outside_root=allow_outside_root)
        problems, notes = result.problems, result.notes
    elif level == 2:
        problems = level2_problems(paths, torch_root=root, allow_outside_root=allow_outside_root)
    else:
        problems = validate(paths, torch_root=root, allow_outside_root=allow_outside_root)
    for note in notes:
        typer.echo(f"note: {note}", err=True)
    if problems:
        raise ConfigError(problems)
    count = sum(len(config_files(p)) for p in paths)
    console.print(f"{count} config file(s) valid (level {level})")


def schema_cmd() -> None:
    """Print the config's JSON Schema (point your editor's YAML support at it)."""
    typer.echo(json.dumps(json_schema(), indent=2, sort_keys=True))


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    command(app, "validate")(validate_cmd)
    command(app, "schema")(schema_cmd)
