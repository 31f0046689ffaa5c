"""Where memory lives: the state directory and the files inside it.

Resolution order: an explicit argument, then ``TESTCURATOR_STATE_DIR``, then
``./.testcurator`` in the current directory. Every command that reads or writes memory
resolves through :func:`resolve_state_dir`, so they all agree.
"""

from __future__ import annotations

import os
from pathlib import Path

STATE_DIR_ENV = "TESTCURATOR_STATE_DIR"
DEFAULT_STATE_DIR = ".testcurator"
MEMORY_DB = "memory.sqlite"


def resolve_state_dir(explicit: Path | str | None = None) -> Path:
    """The state directory to use (not created here)."""
    if explicit is not None and str(explicit) != "":
        return Path(explicit).expanduser()
    env = os.environ.get(STATE_DIR_ENV)
    if env:
        return Path(env).expanduser()
    return Path.cwd() / DEFAULT_STATE_DIR


def memory_db_path(state_dir: Path) -> Path:
    """The SQLite file holding the test index."""
    return state_dir / MEMORY_DB
