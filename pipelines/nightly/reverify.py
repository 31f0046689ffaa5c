"""Which of the draft's results already verify the final configs.

The draft runs every test the bucket did not skip as ``mandatory_success``, under the
bucket's edits (steps.write_exec_config). A test whose entry in the final configs is that same
entry (mandatory, the same edits, the same file capabilities) would run in the verification
exactly as it ran in the draft, the same night, on the same device: its draft records are its
verification records. The verification runs the other tests only (``--curate-only``).

On the holdout with OpenReg, the draft ran 2,536 s of tests, 2,298 s of them test_modules'
float64 gradient checks that pass there: a second run of them verified nothing new.

Anything unusual runs the whole verification, as before: a delta run, a draft record with no
generic test (a file that did not collect), an infrastructure record, a config that does not
load.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from testcurator.config.loader import load_config
from testcurator.config.resolve import LoadedConfig
from testcurator.errors import ConfigError
from testcurator.runner.reconcile import is_infrastructure
from testcurator.runner.results.records import TestRecord
from testcurator.vocab import TestKey

MANDATORY = "mandatory_success"


@dataclass(frozen=True)
class Reuse:
    """The draft records that stand for the verification, and the tests left to run."""

    records: tuple[TestRecord, ...]
    rerun: frozenset[TestKey]
    reused: frozenset[TestKey]


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
    records = tuple(replace(rec, source=str(results)) for key in sorted(reused, key=str) for rec in by_test[key])
    return Reuse(records, frozenset(by_test) - reused, reused)


def _entry(config: LoadedConfig, key: TestKey, torch_root: Path) -> tuple[str, object, object]:
    """(mode, edits, file capabilities) ``config`` gives the test ``key``."""
    file = config.file_for(torch_root / key.file)
    if file is None:
        return config.unlisted_file_mode, None, None
    entry = file.entry_for(key.name)
    if entry is None:
        return file.unlisted_test_mode, None, file.capabilities
    return entry.mode, entry.edits, file.capabilities
