"""Where a pytest that failed by itself broke: one ``file:line: message``, read from its output.

A tree's own harness (``pytest.ini`` addopts, ``conftest.py`` and the plugins it imports) can
stop every pytest before or around its tests: a conftest that raises at import, an option
the ini names that no plugin adds, a hook that asks for an option nobody registered (PyTorch's
shard helper from another commit than its conftest: ``no option named 'print_items'``).
pytest then prints tens of ``INTERNALERROR>`` traceback lines around the one that matters.
:func:`pytest_fault` finds that one in pytest's own formats:

- ``INTERNALERROR>`` tracebacks: the last frame in the tree (else the last outside pytest and
  pluggy) and the exception line;
- ``ImportError while loading conftest '...'``: the conftest's deepest frame (a syntax error's
  ``File "...", line N``) and the ``E`` line;
- ``ERROR: path:line: message`` (an ini pytest cannot parse): as it is;
- ``error: unrecognized arguments: --x`` with ``inifile: path``: the ini line that names ``--x``.
"""

from __future__ import annotations

import re
from pathlib import Path

from testcurator.errors import Location, Problem

_INTERNAL = "INTERNALERROR> "
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+))?$')
_PYTEST_FRAME = re.compile(r"^(?P<file>\S[^:]*):(?P<line>\d+): in (?P<func>\S+)")
_CONFTEST = re.compile(r"^ImportError while loading conftest '(?P<file>[^']+)'")
_INI_ERROR = re.compile(r"^ERROR: (?P<file>[^:]+):(?P<line>\d+): (?P<message>.+)$")
_UNRECOGNIZED = re.compile(r"error: unrecognized arguments: (?P<args>.+)$")
_INIFILE = re.compile(r"^\s*inifile: (?P<file>.+)$")
# Frames of the machinery around a hook, never where a tree's harness broke.
_MACHINERY = ("/_pytest/", "/pluggy/", "/importlib/", "<frozen ")


def pytest_fault(text: str, root: Path | None = None) -> Problem | None:
    """The ``file:line: message`` of what stopped pytest, or None when ``text`` shows no fault."""
    lines = text.splitlines()
    for reader in (_internal_error, _conftest_error, _ini_error, _unrecognized):
        problem = reader(lines, root)
        if problem is not None:
            return problem
    return None


def _internal_error(lines: list[str], root: Path | None) -> Problem | None:
    body = [line[len(_INTERNAL):] for line in lines if line.startswith(_INTERNAL.rstrip())]
    if not body:
        return None
    frames = [m for m in map(_FRAME.match, body) if m]
    message = next((line.strip() for line in reversed(body) if line.strip() and not line.startswith(" ")), "")
    frame = _pick(frames, root)
    if frame is None:
        return Problem(Location("pytest"), message or "internal error")
    func = f" (in {frame['func']})" if frame["func"] else ""
    return Problem(Location(_shown(frame["file"], root), int(frame["line"])), f"{message}{func}")


def _conftest_error(lines: list[str], root: Path | None) -> Problem | None:
    start = next((i for i, line in enumerate(lines) if _CONFTEST.match(line)), None)
    if start is None:
        return None
    conftest = _CONFTEST.match(lines[start])["file"]  # type: ignore[index]
    rest = lines[start + 1:]
    errors = [line[1:].strip() for line in rest if line.startswith("E ")]
    where = Location(_shown(conftest, root))
    # A syntax error names its place in an E line; otherwise the deepest frame in the conftest.
    for match in (m for m in (_FRAME.match(e) for e in errors) if m):
        where = Location(_shown(match["file"], root), int(match["line"]))
    for match in (m for m in map(_PYTEST_FRAME.match, rest) if m):
        if _same_file(match["file"], conftest, root):
            where = Location(_shown(conftest, root), int(match["line"]))
    message = next((e for e in reversed(errors) if not _FRAME.match(e) and e), "the conftest does not import")
    return Problem(where, message)


def _ini_error(lines: list[str], root: Path | None) -> Problem | None:
    match = next((m for m in map(_INI_ERROR.match, lines) if m), None)
    if match is None:
        return None
    return Problem(Location(_shown(match["file"], root), int(match["line"])), match["message"])


def _unrecognized(lines: list[str], root: Path | None) -> Problem | None:
    match = next((m for m in map(_UNRECOGNIZED.search, lines) if m), None)
    if match is None:
        return None
    args = match["args"].split()
    inifile = next((m["file"].strip() for m in map(_INIFILE.match, lines) if m), None)
    message = f"unrecognized arguments: {match['args']}"
    ini_lines = Path(inifile).read_text(encoding="utf-8", errors="replace").splitlines() \
        if inifile is not None and Path(inifile).is_file() else []
    line = next((n for n, text in enumerate(ini_lines, 1) if any(a in text.split() for a in args)), None)
    if inifile is None or line is None:
        return Problem(Location("pytest command line"), message)
    return Problem(Location(_shown(inifile, root), line), f"{message} (the ini's addopts name an option no plugin adds)")


def _pick(frames: list[re.Match[str]], root: Path | None) -> re.Match[str] | None:
    """The last frame in the tree, else the last one outside pytest's machinery, else the last."""
    if root is not None:
        inside = [m for m in frames if _within(m["file"], root)]
        if inside:
            return inside[-1]
    outside = [m for m in frames if not any(part in m["file"] for part in _MACHINERY)]
    return (outside or frames or [None])[-1]


def _within(file: str, root: Path) -> bool:
    return Path(file).is_absolute() and Path(file).resolve().is_relative_to(root.resolve())


def _same_file(shown: str, path: str, root: Path | None) -> bool:
    # pytest prints frames relative to its rootdir (the tree), the conftest's path absolute.
    candidate = Path(shown) if Path(shown).is_absolute() or root is None else root / shown
    return candidate.resolve() == Path(path).resolve()


def _shown(file: str, root: Path | None) -> str:
    """A path relative to the tree when it is in it (what a user opens), else as pytest gave it."""
    path = Path(file)
    if root is not None and path.is_absolute() and _within(file, root):
        return path.resolve().relative_to(root.resolve()).as_posix()
    return file
