"""``validate --level 3``: collect the config's files (no execution) and check the names.

On top of level 2 (:mod:`testcurator.config.levels`): a file that does not collect is a
problem (with the exception pytest reported); a name level 2 found stale is cleared when
collection instantiates it (a test inherited from another module, or made at run time); a
test that is defined but has no instance on the collection device, and an edit's op or
dtype that no instance of its test has here, are notes (a device may have what CPU lacks).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from testcurator.config.levels import TreeProblem, level2, load_for_levels
from testcurator.config.loader import validate
from testcurator.config.resolve import ResolvedEntry
from testcurator.errors import Problem
from testcurator.names import split_dtypes
from testcurator.plugin.curate import wholly_skipped
from testcurator.runner.collect import CollectedTest, collect_files


@dataclass
class Level3Result:
    """Problems (the config is wrong) and notes (worth a look on the device)."""

    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    collected: int = 0


def level3(paths: Sequence[Path], *, torch_root: Path | None, allow_outside_root: bool = False) -> Level3Result:
    """Levels 1, 2 and 3 over ``paths``."""
    result = Level3Result(problems=validate(paths, torch_root, allow_outside_root=allow_outside_root))
    loaded = load_for_levels(paths, torch_root)
    stale = level2(loaded)
    files = [f for f in loaded.files if f.resolved_path.is_file()]
    root = torch_root or (Path(os.environ["TORCH_ROOT"]) if os.environ.get("TORCH_ROOT") else Path.cwd())
    collection = collect_files(sorted({f.resolved_path for f in files}), rootdir=root)
    result.collected = len(collection.tests)
    by_file: dict[str, list[CollectedTest]] = {}
    for t in collection.tests:
        by_file.setdefault(t.file, []).append(t)
    broken = {e.file: e for e in collection.errors}
    for f in files:
        real = os.path.realpath(f.resolved_path)
        if real in broken:
            if wholly_skipped(f):  # the pipeline's decision for a file that does not import
                result.notes.append(f"{f.resolved_path.name} does not collect ({broken[real].summary}); the config "
                                    "skips it as a whole")
            else:
                result.problems.append(Problem(f.location,
                                               f"{f.resolved_path.name} does not collect: {broken[real].summary}"))
            continue
        generics: dict[str, list[CollectedTest]] = {}
        for t in by_file.get(real, []):
            generics.setdefault(t.generic, []).append(t)
        result.notes += _entry_notes(f.entries, generics, f.resolved_path.name)
    result.problems += [t.problem for t in stale if not _cleared(t, by_file, broken)]
    result.problems.sort(key=lambda p: (p.location.file, p.location.line or 0, p.location.col or 0))
    return result


def _cleared(tp: TreeProblem, by_file: dict[str, list[CollectedTest]], broken: dict[str, object]) -> bool:
    if tp.name is None or tp.file in broken:
        return False
    return any(t.generic == tp.name for t in by_file.get(tp.file, []))


def _has_op(ops: set[str | None], name: str) -> bool:
    """Whether an instance runs op ``name``: a variant's own name (``div_no_rounding_mode``),
    or the OpInfo's, which covers every variant (``div``), as the plugin applies it."""
    ref = name.replace(".", "_")
    return any(op is not None and (op == ref or op.startswith(ref + "_")) for op in ops)


def _entry_notes(entries: Sequence[ResolvedEntry], generics: dict[str, list[CollectedTest]], file_name: str) -> list[str]:
    notes = []
    for entry in entries:
        for name in entry.names:
            inst = generics.get(name)
            if not inst:
                notes.append(f"{file_name}: {name} has no instance on the collection device")
                continue
            edits = entry.edits
            if edits is None:
                continue
            ops = {t.op for t in inst}
            dtypes = {member for t in inst for member in split_dtypes(t.dtype)}  # each member of a dtype pair
            notes += [f"{file_name}: op {r.name} of the edit on {name} has no instance here"
                      for r in (edits.ops.exclude if edits.ops else []) if not _has_op(ops, r.name)]
            notes += [f"{file_name}: dtype {d.name} of the edit on {name} has no instance here (device-only?)"
                      for d in (edits.dtypes.exclude if edits.dtypes else []) if d.name not in dtypes]
    return notes
