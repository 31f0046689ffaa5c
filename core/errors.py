"""One base exception, with context-carrying subclasses.

The CLI maps each class to an exit code (``exit_code``); nothing is turned into a string
and carried on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Location:
    """Where a problem is: a file, and (1-based) line and column when known."""

    file: str
    line: int | None = None
    col: int | None = None

    def __str__(self) -> str:
        parts = [self.file]
        if self.line is not None:
            parts.append(str(self.line))
            if self.col is not None:
                parts.append(str(self.col))
        return ":".join(parts)


@dataclass(frozen=True)
class Problem:
    """One problem found in an input, printed as ``file:line:col: message``."""

    location: Location
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"


class CuratorError(Exception):
    """Base of every error testcurator raises on purpose."""

    exit_code = 1


class BadInputError(CuratorError):
    """An input (config, profile, path) is wrong; the user must fix it."""

    exit_code = 2


class ConfigError(BadInputError):
    """A config (or several) failed validation; carries every problem found."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class MissingPathError(BadInputError):
    """A path the user named does not exist."""

    def __init__(self, path: Path | str, what: str = "path") -> None:
        self.path = Path(path)
        self.what = what
        super().__init__(f"{what} does not exist: {path}")


class MemoryStoreError(CuratorError):
    """The memory store is unusable (corrupt, wrong schema)."""

    exit_code = 2


class ExecutionError(CuratorError):
    """Running tests failed for a reason outside the tests themselves."""

    exit_code = 3


class BrainError(CuratorError):
    """A brain (offline or LLM) could not produce a valid decision."""

    exit_code = 4


class Interrupted(CuratorError):
    """The user interrupted the command (Ctrl-C, SIGINT); exit 130 as shells expect."""

    exit_code = 130

    def __init__(self, message: str = "interrupted") -> None:
        super().__init__(message)


class Terminated(Interrupted):
    """The command was sent SIGTERM (a CI job's time limit, ``kill``): stopped as an interrupt
    is, its pytest sessions with it; exit 143 (128 + 15) as shells report it."""

    exit_code = 143

    def __init__(self, message: str = "terminated (SIGTERM, exit 143)") -> None:
        super().__init__(message)
