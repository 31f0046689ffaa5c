"""Stage 1, scope: narrow the test tree to the folders and files worth analysing.

Candidates are the folders directly under ``test/`` and the test files at its top (and the
files inside kept folders). Each candidate gets a short, cheap summary (how many tests,
whether it is device-generic) so the brain decides from evidence, then the brain's
:class:`FileDecision` records say what was kept or dropped and why.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from testcurator.agents.brain import Brain, BrainContext, ScopeRequest
from testcurator.agents.decision import FileDecision
from testcurator.errors import BadInputError

TEST_DIR = "test"
_TEST_DEF = re.compile(r"^\s*def (test\w*)\s*\(", re.M)
_DEVICE_GENERIC = re.compile(r"instantiate_device_type_tests\(")
SAMPLE = 5


def test_files(folder: Path) -> list[Path]:
    """Test modules under ``folder``, as pytest would find them (``test_*.py``), sorted."""
    return sorted(p for p in folder.rglob("test_*.py") if p.is_file() and "__pycache__" not in p.parts)


def _scan(paths: Sequence[Path]) -> tuple[int, list[str], int]:
    names: list[str] = []
    generic = 0
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        names.extend(_TEST_DEF.findall(text))
        generic += bool(_DEVICE_GENERIC.search(text))
    return len(names), names, generic


def _request(root: Path, path: Path) -> ScopeRequest:
    files = test_files(path) if path.is_dir() else [path]
    count, names, generic = _scan(files)
    kind = "dir" if path.is_dir() else "file"
    parts = [f"{len(files)} test file(s), {count} test functions"]
    if generic:
        parts.append(f"{generic} device-generic (instantiate_device_type_tests)")
    return ScopeRequest(path=path.relative_to(root).as_posix(), kind=kind, summary="; ".join(parts),
                        n_tests=count, sample_tests=tuple(sorted(set(names))[:SAMPLE]))


def candidates(root: Path) -> list[ScopeRequest]:
    """One request per folder directly under ``test/`` and per test file at its top."""
    test_dir = root / TEST_DIR
    if not test_dir.is_dir():
        raise BadInputError(f"{root} has no {TEST_DIR}/ folder: --torch-root must be a PyTorch-style tree")
    entries = sorted(p for p in test_dir.iterdir() if not p.name.startswith((".", "_")))
    picked = [p for p in entries if (p.is_dir() and test_files(p)) or (p.is_file() and p.name.startswith("test_") and p.suffix == ".py")]
    if not picked:
        raise BadInputError(f"{test_dir} holds no test_*.py files")
    return [_request(root, p) for p in picked]


def scope_tree(root: Path, brain: Brain, ctx: BrainContext) -> list[FileDecision]:
    """The brain's keep/drop decision for every candidate, in candidate order."""
    requests = candidates(root)
    decisions = brain.scope(requests, ctx)
    if [d.path for d in decisions] != [r.path for r in requests]:
        raise BadInputError("scope brain answered for other paths than it was asked")
    return decisions


def kept_files(root: Path, decisions: Sequence[FileDecision]) -> list[str]:
    """The test files (relative to ``root``) of every kept folder and file, sorted."""
    out: set[str] = set()
    for decision in decisions:
        if not decision.keep:
            continue
        path = root / decision.path
        for file in test_files(path) if path.is_dir() else [path]:
            out.add(file.relative_to(root).as_posix())
    return sorted(out)
