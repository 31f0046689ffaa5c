"""Validation in levels (seed 000's L1/L2/L3), the static ones.

- Level 1 (:func:`testcurator.config.loader.validate`): schema, syntax, paths.
- Level 2 (:func:`level2`): the config against the upstream tree, read with ``ast`` only
  (nothing imported): every named test is defined in its file (else the entry is *stale*),
  an ``ops``/``modules`` edit is on an ``@ops``/``@modules`` test and names a known
  OpInfo/ModuleInfo, an excluded dtype occurs in the test's ``@dtypes*`` decorators when
  those are literal.
- Level 3 collects the files (no execution); it lives above the runner
  (:mod:`testcurator.pipelines.validate_tree`) and may clear a stale name level 2 could not
  see (a test inherited from another module, or generated).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from testcurator.config.loader import _load, paused_gc, problem_order, validate
from testcurator.config.resolve import LoadedConfig, ResolvedEntry
from testcurator.config.upstream_names import TestFacts, test_facts, variant_names
from testcurator.errors import Problem
from testcurator.vocab import split_name


@dataclass(frozen=True)
class TreeProblem:
    """A level-2 problem; ``name`` is set when it says a test is not defined (level 3 may clear it)."""

    problem: Problem
    file: str  # real path of the upstream file
    name: str | None = None


def load_for_levels(paths: Sequence[Path], torch_root: Path | None) -> LoadedConfig:
    """The config as far as it loads, a document with schema errors as far as it validates
    (problems are level 1's to report)."""
    with paused_gc():
        loaded, _, _ = _load(paths, torch_root=torch_root, check_paths=True, salvage=True)
    return loaded


def level2_problems(paths: Sequence[Path], *, torch_root: Path | None, allow_outside_root: bool = False) -> list[Problem]:
    """Levels 1 and 2: every problem, sorted by place."""
    problems = validate(paths, torch_root, allow_outside_root=allow_outside_root)
    problems += [t.problem for t in level2(load_for_levels(paths, torch_root))]
    return sorted(problems, key=problem_order)


def level2(loaded: LoadedConfig) -> list[TreeProblem]:
    """What level 2 finds in a loaded config (level 1's problems not included)."""
    out: list[TreeProblem] = []
    for file in loaded.files:
        path = file.resolved_path
        if not path.is_file():
            continue  # level 1 says it does not exist
        real = os.path.realpath(path)
        facts = test_facts(path)
        if not facts and file.entries:
            out.append(TreeProblem(Problem(file.location, f"no test is defined in {path.name} as read statically "
                                           "(a syntax error, or tests made at run time: try --level 3)"), real))
            continue
        for entry in file.entries:
            out += _entry_problems(entry, facts, path.name, real)
    return out


def _entry_problems(entry: ResolvedEntry, facts: dict[str, TestFacts], file_name: str, real: str) -> list[TreeProblem]:
    out = []
    for name in entry.names:
        fact = facts.get(name)
        if fact is None:
            cls = split_name(name)[0]
            hint = (f"no class {cls} in the file" if cls and not any(k.startswith(cls + "::") for k in facts)
                    else "removed or renamed upstream?")
            out.append(TreeProblem(Problem(entry.location, f"stale entry: {name} is not defined in {file_name} ({hint})"),
                                   real, name))
            continue
        out += [TreeProblem(Problem(entry.location, message), real) for message in edit_problems(entry, name, fact)]
    return out


def edit_problems(entry: ResolvedEntry, name: str, fact: TestFacts) -> list[str]:
    """Why an edit of ``entry`` can never apply to test ``name`` (empty when it can)."""
    edits, out = entry.edits, []
    if edits is None:
        return out
    if edits.ops and edits.ops.exclude:
        if not fact.ops:
            out.append(f"ops edit on {name}, which is not an @ops test: it never applies")
        out += [f"op {r.name!r} of the ops edit on {name} is not an OpInfo of the installed torch"
                for r in edits.ops.exclude if not _known_variant(r.name)]
    if edits.modules and edits.modules.exclude:
        if not fact.modules:
            out.append(f"modules edit on {name}, which is not a @modules test: it never applies")
        out += [f"module {r.name!r} of the modules edit on {name} is not a ModuleInfo of the installed torch"
                for r in edits.modules.exclude if not _known_variant(r.name)]
    if edits.dtypes and edits.dtypes.exclude and fact.dtypes is not None:
        known = ", ".join(sorted(fact.dtypes)) or "none: no @dtypes, @ops or @modules"
        out += [f"dtype {d.name} of the dtypes edit on {name} never occurs in it (its dtypes on any device: {known})"
                for d in edits.dtypes.exclude if d.name not in fact.dtypes]
    return out


def _known_variant(name: str) -> bool:
    known = variant_names()
    return not known or name.replace(".", "_") in known
