"""What a test needs from the machine: a tool on PATH, an installed module.

Without it the test is skipped, except in CI (``CI`` set and not ``0``/``false``, as GitHub
Actions and .ci/run set it), where that is a failure: .ci/run installs all of them, so a
missing one there means the suite ran less than it says, and a green run must not hide it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing(message: str) -> NoReturn:
    """Skip the test for want of ``message``'s thing, or fail it in CI."""
    if in_ci():
        pytest.fail(f"{message} (CI=true: a missing requirement fails instead of skipping)", pytrace=False)
    pytest.skip(message)


def command(*names: str, hint: str) -> str:
    """The path of the first of ``names`` on PATH."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    missing(f"{' / '.join(names)} is not on PATH ({hint})")


def module(name: str, hint: str) -> ModuleType:
    """``name`` imported (find_spec first: a module that is absent is not an import error)."""
    if importlib.util.find_spec(name) is None:
        missing(f"{name} is not installed ({hint})")
    return importlib.import_module(name)


def modules(*names: str, hint: str) -> None:
    """Every one of ``names`` is installed (one message naming all that are not)."""
    absent = [name for name in names if importlib.util.find_spec(name) is None]
    if absent:
        missing(f"{', '.join(absent)} not installed ({hint})")


BROWSERS = ("chromium", "chromium-browser", "google-chrome")
# Headless, as root, on a machine whose network is closed: no sandbox, no background connections.
BROWSER_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars")


def chromium(profile: Path, *args: str, window: tuple[int, int] = (900, 1400)) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium (a fresh profile folder ``profile``) with ``args``; its output."""
    browser = command(*BROWSERS, hint="Debian: apt-get install -y chromium; .ci/run installs it")
    return subprocess.run([browser, *BROWSER_FLAGS, f"--window-size={window[0]},{window[1]}",
                           f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=120, check=True)
