"""What the option extensions (``events.py``, ``tiers.py``, ``shard.py``, ``labels.py``,
``only.py``, ``isolate.py``) share when they add their options to the ``curate`` group."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest


def first_time(parser: pytest.Parser, extension: str) -> bool:
    """True the first time ``extension`` adds its options to ``parser``: both its own
    ``pytest_addoption`` (loaded with ``-p``) and the entry plugin call it."""
    flag = f"_testcurator_{extension}_options_added"
    if getattr(parser, flag, False):
        return False
    setattr(parser, flag, True)
    return True


def existing_file(what: str) -> Callable[[str], Path]:
    """An option type: the value as a path to a file that exists, else a usage error at
    parse time naming ``what``."""
    def check(value: str) -> Path:
        path = Path(value)
        if not path.is_file():
            raise argparse.ArgumentTypeError(f"{what} does not exist: {value}")
        return path

    return check


def positive_mb(value: str) -> float:
    """An option type: a positive number of MB, else a usage error at parse time."""
    mb = float(value)
    if mb <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of MB, not {value}")
    return mb
