"""What a path option may name, checked when the command line is parsed.

Every path option declares its kind (:class:`PathKind`) in :mod:`testcurator.cli.options`;
the check turns a missing input, a file where a folder is expected (or the reverse), an
existing output of the wrong kind, an output in a folder that does not exist, or a place
the user cannot write, into a usage error (exit 2, one line and the usage line) before
anything runs or is written. :func:`removing_if_created` removes an output folder a command
created when the command stops before it wrote anything in it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from enum import Enum
from pathlib import Path

import typer


class PathKind(str, Enum):
    """What a path option names."""

    DIR_IN = "dir_in"  # an existing folder (a torch root)
    FILE_IN = "file_in"  # an existing file (a profile)
    PATH_IN = "path_in"  # an existing file or folder (a config, results)
    DIR_OUT = "dir_out"  # a folder, created if missing (--out of run, the state dir)
    FILE_OUT = "file_out"  # a file, in a folder that exists (--out of review)
    FILE_OUT_MAKING = "file_out_making"  # a file whose folders are made, and said (ci github's workflow)


def check_path(path: Path, kind: PathKind, *, default: bool = False, noun: str | None = None) -> None:
    """Raise ``typer.BadParameter`` when ``path`` cannot be what ``kind`` says.

    ``default``: the value is the option's default (``ci github``'s
    ``.github/workflows/...``), whose folders the command may create. ``noun``: what the
    path is, for the message (``torch root``).
    """
    if kind is PathKind.DIR_IN:
        _need(path, folder=True, noun=noun)
    elif kind is PathKind.FILE_IN:
        _need(path, folder=False, noun=noun)
    elif kind is PathKind.PATH_IN:
        if not path.exists():
            raise typer.BadParameter(f"{noun or 'path'} does not exist: {path}")
    elif kind is PathKind.DIR_OUT:
        if path.exists() and not path.is_dir():
            raise typer.BadParameter(f"{path} is a file; name a folder (it is created if missing)")
        _writable(_nearest_existing(path))
    else:
        if path.is_dir():
            raise typer.BadParameter(f"{path} is a folder; name a file")
        if not default and kind is PathKind.FILE_OUT and not path.parent.is_dir():
            raise typer.BadParameter(f"the folder {path.parent} does not exist; create it first, or name another file")
        _writable(_nearest_existing(path.parent))


def _need(path: Path, *, folder: bool, noun: str | None) -> None:
    what = "folder" if folder else "file"
    if not path.exists():
        raise typer.BadParameter(f"{noun or what} does not exist: {path}")
    if path.is_dir() != folder:
        raise typer.BadParameter(f"{path} is a {'file' if folder else 'folder'}; a {what} is expected")


def _nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists."""
    return next((p for p in (path, *path.parents) if p.exists()), Path(path.anchor or "/"))


def _writable(folder: Path) -> None:
    """A file can be created in ``folder`` (tried, not guessed: root ignores permission bits)."""
    if not folder.is_dir():
        raise typer.BadParameter(f"{folder} is a file, not a folder: nothing can be written under it")
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".testcurator-probe-"):
            pass
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise typer.BadParameter(f"cannot write in {folder}: {reason}") from None


@contextlib.contextmanager
def removing_if_created(folder: Path) -> Iterator[None]:
    """Remove ``folder`` (and the empty folders made for it) when the block fails and left it empty.

    A command whose output folder it created itself, and that then stops (bad input found
    late, an interrupt), leaves nothing behind; a folder that existed before is never touched.
    """
    made = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        yield
    except BaseException:
        for path in made:  # deepest first
            with contextlib.suppress(OSError):
                _remove_empty(path)
        raise


def _remove_empty(path: Path) -> None:
    from testcurator.lock import OUT_LOCK, STATE_LOCK

    for name in (OUT_LOCK, STATE_LOCK):
        lock = path / name
        if lock.is_file() and lock.stat().st_size == 0:  # the run's released lock: nothing it wrote
            lock.unlink()
    try:
        path.rmdir()
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST):
            raise
