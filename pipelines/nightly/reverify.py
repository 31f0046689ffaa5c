"""Which of the draft's results already verify the final configs.

The draft runs every test the bucket did not skip as ``mandatory_success``, under the
bucket's edits (steps.write_exec_config). A test whose entry in the final configs is that same
entry (mandatory, the same edits, the same file capabilities) would run in the verification
exactly as it ran in the draft, the same night, on the same device: its draft records are its
verification records. The verification runs the other tests only (``--curate-only``).

On the holdout with OpenReg, the draft ran 2,536 s of tests, 2,298 s of them test_modules'
float64 gradient checks that pass there: a second run of them verified nothing new.

A test whose entry did change (refine excluded the ops it failed, or kept it for review) is
looked at per instance: an instance both configs run as mandatory (config/apply.py
:func:`~testcurator.config.apply.decide`, on what its record says it is) and that passed in
the draft verifies itself too; the test's other instances run again, by their instance keys.
On OpenReg's corpus the gradient files are one generic test each over hundreds of ops: one
excluded op made the whole test, thousands of instances and most of the draft's time, run twice.

Anything unusual runs the whole verification, as before: a delta run, a draft record with no
generic test (a file that did not collect), an infrastructure record, a config that does not
load.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from testcurator.config.apply import decide
from testcurator.config.loader import load_config
from testcurator.config.resolve import LoadedConfig
from testcurator.errors import ConfigError
from testcurator.names import TestIdentity
from testcurator.runner.reconcile import is_infrastructure
from testcurator.runner.results.records import TestRecord
from testcurator.vocab import TestKey, instance_key, split_name

MANDATORY = "mandatory_success"


@dataclass(frozen=True)
class Reuse:
    """The draft records that stand for the verification, and the tests left to run: whole
    (``rerun``), or the instances of a test some of whose instances verify themselves
    (``instances``: instance key -> generic name, vocab.instance_key)."""

    records: tuple[TestRecord, ...]
    rerun: frozenset[TestKey]
    reused: frozenset[TestKey]
    instances: tuple[tuple[str, str], ...] = ()


def plan(draft: Sequence[TestRecord], draft_config: Path, final_config: Path, torch_root: Path,
         results: Path) -> Reuse | None:
    """What the verification can take from the draft (``results``: the draft's results file,
    named in each reused record); None: run all of it."""
    by_test: dict[TestKey, list[TestRecord]] = {}
    for rec in draft:
        if rec.generic is None or is_infrastructure(rec):
            return None
        by_test.setdefault(TestKey.of(rec.nodeid.split("::", 1)[0], rec.generic), []).append(rec)
    try:
        before = load_config(draft_config, torch_root=torch_root)
        after = load_config(final_config, torch_root=torch_root)
    except ConfigError:
        return None
    reused = frozenset(key for key in by_test
                       if (final := _entry(after, key, torch_root))[0] == MANDATORY
                       and final == _entry(before, key, torch_root))
    kept = [rec for key in sorted(reused, key=str) for rec in by_test[key]]
    rerun, instances = set(), []
    for key in sorted(set(by_test) - reused, key=str):
        mine = [(rec, _verifies(rec, before, after, torch_root / key.file)) for rec in by_test[key]]
        if not any(ok for _, ok in mine) or _includes(after, key, torch_root):
            rerun.add(key)  # nothing of it stands, or the final config adds instances the draft never had
            continue
        kept += [rec for rec, ok in mine if ok]
        instances += [(instance_key(rec.nodeid, rec.generic), rec.generic or key.name) for rec, ok in mine if not ok]
    records = tuple(replace(rec, source=str(results)) for rec in kept)
    return Reuse(records, frozenset(rerun), reused, tuple(instances))


def _verifies(rec: TestRecord, before: LoadedConfig, after: LoadedConfig, path: Path) -> bool:
    """Whether the draft's record of one instance is its verification record: it passed, run
    as mandatory by both configs."""
    if rec.outcome != "passed" or rec.flaky or not rec.generic:
        return False
    cls, test = split_name(rec.generic)
    # The record's op and variant, as the plugin matches them: an exclusion of ``div`` covers
    # ``div_floor_rounding`` too.
    ident = TestIdentity(cls, test, rec.device, rec.dtype, rec.op, rec.op_variant, rec.module, rec.params)
    return all(decide(config, config.file_for(path), ident).mode == MANDATORY for config in (before, after))


def _includes(config: LoadedConfig, key: TestKey, torch_root: Path) -> bool:
    """Whether ``key``'s entry adds dtypes upstream does not instantiate (edits.dtypes.include)."""
    file = config.file_for(torch_root / key.file)
    entry = file.entry_for(key.name) if file is not None else None
    return bool(entry is not None and entry.edits is not None and entry.edits.dtypes is not None
                and entry.edits.dtypes.include)


def _entry(config: LoadedConfig, key: TestKey, torch_root: Path) -> tuple[str, object, object]:
    """(mode, edits, file capabilities) ``config`` gives the test ``key``."""
    file = config.file_for(torch_root / key.file)
    if file is None:
        return config.unlisted_file_mode, None, None
    entry = file.entry_for(key.name)
    if entry is None:
        return file.unlisted_test_mode, None, file.capabilities
    return entry.mode, entry.edits, file.capabilities
