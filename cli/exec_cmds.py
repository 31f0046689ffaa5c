"""Command group registered by testcurator.cli.main (filled in by its owner)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
