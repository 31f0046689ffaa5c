"""Rails before disk: what an LLM decided reaches the configs only once it validates.

An LLM run's configs are first written to a scratch copy of the configs folder and checked
with ``validate --level 2`` (config/levels.py: schema, paths, every named test defined in its
file, every edit one that can apply). A problem that names a test the LLM decided (a dtype
it excluded that the test never has, an op that is not among its OpInfos...) sends that test
to the offline brain instead: its decision replaces the LLM's in the run's store, with the
problem in the reason, and the copy is checked again. A problem the configs already had
before this emit (a human's stale entry) is not this guard's: ``validate`` reports it as
before. Any other problem (one that survives the offline brain's decision, or names no test:
a schema error, which the rails keep the model from causing) is a bug, and stops the run
before anything is written.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from testcurator.agents.decision import FALLBACK_BRAIN, LLM_BRAIN, Decision, fallback_reason
from testcurator.config.layout import config_path
from testcurator.config.levels import level2_problems
from testcurator.errors import BrainError, Problem
from testcurator.pipelines.store import RunStore

# Emit ``files`` into the given configs folder (the run's emit, pointed elsewhere).
EmitInto = Callable[[Path], object]
# The offline brain's decisions for some tests of one file: (rel, tests) -> test -> decision.
Redecide = Callable[[str, Sequence[str]], Mapping[str, Decision]]


class UnvalidatedConfigError(BrainError):
    """A config the run was about to write fails ``validate --level 2``, and not (only) for an
    LLM answer the offline brain could replace: a bug, reported before anything is written."""


def check_before_disk(configs_dir: Path, torch_root: Path, store: RunStore, stage: str, files: Sequence[str],
                      emit_into: EmitInto, redecide: Redecide) -> list[str]:
    """Validate the configs ``emit_into`` would write; redecide offline the LLM's decisions
    they break. Returns the tests redecided (``file::test``)."""
    redone: list[str] = []
    before = {p.message for p in _problems(configs_dir, torch_root, files)}
    for attempt in range(2):
        problems = [p for p in _staged_problems(configs_dir, torch_root, files, emit_into) if p.message not in before]
        # The second look blames the fallback's decisions too: they had their chance.
        brains = {LLM_BRAIN, FALLBACK_BRAIN} if attempt else {LLM_BRAIN}
        blamed = _blamed(problems, store, stage, files, brains)
        if not problems:
            return redone
        if attempt or not blamed:
            lines = "\n".join(f"  {p}" for p in problems)
            raise UnvalidatedConfigError(f"the configs this run would write do not validate (level 2):\n{lines}")
        for rel, found in blamed.items():
            redone += _redecide(store, stage, rel, found, redecide)
    return redone


def _problems(configs_dir: Path, torch_root: Path, files: Sequence[str]) -> list[Problem]:
    """Levels 1 and 2 over the configs of ``files`` in ``configs_dir`` (those that exist)."""
    paths = [config_path(configs_dir, rel) for rel in files if config_path(configs_dir, rel).is_file()]
    return level2_problems(paths, torch_root=torch_root) if paths else []


def _staged_problems(configs_dir: Path, torch_root: Path, files: Sequence[str], emit_into: EmitInto) -> list[Problem]:
    with tempfile.TemporaryDirectory(prefix="testcurator-emit-") as tmp:
        staged = Path(tmp) / "configs"
        if configs_dir.is_dir():
            shutil.copytree(configs_dir, staged)
        else:
            staged.mkdir()
        emit_into(staged)
        problems = _problems(staged, torch_root, files)
        # Point the problems at the real folder, where a reader will look.
        return [replace(p, location=replace(p.location, file=p.location.file.replace(str(staged), str(configs_dir))))
                for p in problems]


def _blamed(problems: Sequence[Problem], store: RunStore, stage: str, files: Sequence[str],
            brains: set[str]) -> dict[str, list[tuple[str, Problem]]]:
    """file -> (test decided by one of ``brains``, problem naming it)."""
    out: dict[str, list[tuple[str, Problem]]] = {}
    for rel in files:
        mine = [d.test for d in store.read_decisions(stage, rel) or [] if d.brain in brains]
        found = [(test, p) for p in problems for test in mine if _names(p.message, test)]
        if found:
            out[rel] = found
    return out


def _names(message: str, test: str) -> bool:
    """Whether a level-2 message is about ``test`` (they quote the test's name)."""
    return any(word.strip(",;:.()'\"") == test for word in message.split())


def _redecide(store: RunStore, stage: str, rel: str, found: Sequence[tuple[str, Problem]], redecide: Redecide) -> list[str]:
    decisions = store.read_decisions(stage, rel) or []
    why = {test: p.message for test, p in found}
    offline = redecide(rel, sorted(why))
    updated = []
    for d in decisions:
        new = offline.get(d.test) if d.test in why else None
        if new is None:
            updated.append(d)
            continue
        note = f"its config entry did not validate: {why[d.test]}"
        updated.append(replace(new, brain=FALLBACK_BRAIN, reason=fallback_reason(new.reason, note),
                               evidence=(*new.evidence, f"llm: {note}")))
    store.write_decisions(stage, rel, updated)
    return [f"{rel}::{test}" for test in sorted(why) if test in offline]
