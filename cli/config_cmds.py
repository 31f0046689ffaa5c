"""`testcurator validate` and `testcurator schema`."""

from __future__ import annotations

import json

import typer
from rich.console import Console

from testcurator.cli.commands import command
from testcurator.cli.options import AllowOutsideRoot, ConfigPaths, TorchRoot
from testcurator.config.loader import config_files, validate
from testcurator.config.schema import json_schema
from testcurator.errors import ConfigError


def validate_cmd(paths: ConfigPaths, torch_root: TorchRoot = None, allow_outside_root: AllowOutsideRoot = False) -> None:
    """Check configs: exit 0 when valid, else exit 2 with one `file:line:col: message` per problem.

    Test paths must be Python test files inside the torch root; instantiated names get the
    generic name to write instead (checked against the upstream file when it is found).
    """
    problems = validate(paths, torch_root=torch_root.resolve() if torch_root else None,
                        allow_outside_root=allow_outside_root)
    if problems:
        raise ConfigError(problems)
    count = sum(len(config_files(p)) for p in paths)
    Console(highlight=False).print(f"{count} config file(s) valid")


def schema_cmd() -> None:
    """Print the config's JSON Schema (point your editor's YAML support at it)."""
    typer.echo(json.dumps(json_schema(), indent=2, sort_keys=True))


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    command(app, "validate")(validate_cmd)
    command(app, "schema")(schema_cmd)
