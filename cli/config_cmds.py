"""`testcurator validate` and `testcurator schema`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from testcurator.config.loader import config_files, validate
from testcurator.config.schema import json_schema
from testcurator.errors import ConfigError

TorchRoot = Annotated[
    Optional[Path],
    typer.Option("--torch-root", help="Value of ${TORCH_ROOT} in config paths (default: $TORCH_ROOT).", envvar="TORCH_ROOT"),
]


def validate_cmd(
    paths: Annotated[list[Path], typer.Argument(help="Config files or directories of configs.")],
    torch_root: TorchRoot = None,
) -> None:
    """Check configs: exit 0 when valid, else exit 2 with one `file:line:col: message` per problem."""
    problems = validate(paths, torch_root=torch_root.resolve() if torch_root else None)
    if problems:
        raise ConfigError(problems)
    count = sum(len(config_files(p)) for p in paths)
    Console(highlight=False).print(f"{count} config file(s) valid")


def schema_cmd() -> None:
    """Print the config's JSON Schema (point your editor's YAML support at it)."""
    typer.echo(json.dumps(json_schema(), indent=2, sort_keys=True))


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command("validate")(validate_cmd)
    app.command("schema")(schema_cmd)
