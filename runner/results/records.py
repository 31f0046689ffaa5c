"""One record per test: what ran, how it ended, why it failed.

Every producer (the runner's event log, pytest's JUnit XML, PyTorch's ``run_test.py``
reports, our own JSONL) ends in :class:`TestRecord`, so classification and re-bucketing
see one shape. Records are frozen; the runner derives new ones with
:func:`dataclasses.replace` (e.g. after a retry).

``outcome`` is one of :data:`testcurator.vocab.OUTCOMES`: pytest's own outcomes plus ``crashed`` (the
process died under the test: signal, abort, ``os._exit``) and ``timeout`` (the per-test
hang guard fired). ``failure_text`` is cut to :data:`MAX_FAILURE_TEXT` characters (head
and tail kept, since the error is usually at the end of a traceback and the cause at the
start); ``evidence`` is what the classifier matched, kept whole.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from testcurator.errors import BadInputError, Location, Problem
from testcurator.files import atomic_write_text
from testcurator.names import Params, params_from
from testcurator.vocab import FAILING, OUTCOMES

MAX_FAILURE_TEXT = 8000


@dataclass(frozen=True)
class TestRecord:
    """The result of one instantiated test (one node id)."""

    __test__ = False  # pytest: not a test class despite the name

    nodeid: str
    outcome: str
    generic: str | None = None
    device: str | None = None
    dtype: str | None = None
    op: str | None = None
    module: str | None = None
    failure_class: str | None = None
    evidence: str | None = None
    duration: float = 0.0
    attempts: int = 1
    flaky: bool = False
    failure_text: str | None = None
    source: str | None = None  # the file the record was read from (ingestion), if any
    # The instance's @parametrize values, (argument, repr of the live value); () in records
    # written before they were kept, and where only the name was known (foreign JUnit XML).
    params: Params = ()
    # The OpInfo's variant (``floor_rounding`` of ``div``), which ``op`` does not carry: the
    # config excludes one variant by its formatted name (``div_floor_rounding``).
    op_variant: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.params, tuple) or any(not isinstance(p, tuple) for p in self.params):
            object.__setattr__(self, "params", params_from(self.params))  # JSON: lists or an object
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {self.outcome!r} (expected one of {', '.join(OUTCOMES)})")

    @property
    def is_failure(self) -> bool:
        return self.outcome in FAILING

    def to_json(self) -> dict[str, Any]:
        # Shallow: every field is a str, a number, a bool, None or params' tuples of strings, which
        # dataclasses.asdict copied deeply for nothing (80% of writing the corpus's 36,000 records).
        return {name: getattr(self, name) for name in _FIELD_ORDER}


_FIELD_ORDER = tuple(f.name for f in fields(TestRecord))
_FIELD_NAMES = frozenset(_FIELD_ORDER)


def truncate(text: str | None, limit: int = MAX_FAILURE_TEXT) -> str | None:
    """Keep the head and the tail of a long text, marking the cut."""
    if text is None or len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head - 60
    return f"{text[:head]}\n... [{len(text) - head - tail} characters cut] ...\n{text[-tail:]}"


def record_from_json(data: dict[str, Any], *, file: str = "<json>", line: int | None = None) -> TestRecord:
    """A record from one decoded JSONL object; unknown keys are ignored (newer writers)."""
    if not isinstance(data, dict) or "nodeid" not in data or "outcome" not in data:
        raise BadInputError(f"{Location(file, line)}: not a test record (needs 'nodeid' and 'outcome')")
    kwargs = {k: v for k, v in data.items() if k in _FIELD_NAMES}
    try:
        return TestRecord(**kwargs)
    except (TypeError, ValueError) as exc:
        raise BadInputError(f"{Location(file, line)}: {exc}") from exc


# A run reads its results files several times once they are written (the draft's: the merge,
# the configs, the verification's plan; the verification's: the reason check, the report, the
# gap board, the night's history): 0.45 s a parse at the corpus's 36,000 records, against 0.03 s
# to read and hash the bytes. Records are frozen, so the last few files' records are kept, by content.
_READ_CACHE: OrderedDict[bytes, tuple[TestRecord, ...]] = OrderedDict()
_READ_CACHE_FILES = 4


def read_jsonl(path: Path) -> list[TestRecord]:
    """Every record of a results JSONL file; a bad line is a BadInputError with its line."""
    data = path.read_bytes()
    key = hashlib.blake2b(data, digest_size=16).digest()
    if key in _READ_CACHE:
        _READ_CACHE.move_to_end(key)
        return list(_READ_CACHE[key])
    records = _parse(path, data.decode("utf-8"))
    _READ_CACHE[key] = tuple(records)
    while len(_READ_CACHE) > _READ_CACHE_FILES:
        _READ_CACHE.popitem(last=False)
    return records


def _parse(path: Path, text: str) -> list[TestRecord]:
    records: list[TestRecord] = []
    # Lines as a text-mode file reads them (universal newlines), not str.splitlines's.
    for lineno, line in enumerate(io.StringIO(text, newline=None), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            problem = Problem(Location(str(path), lineno, exc.colno), f"invalid JSON: {exc.msg}")
            raise BadInputError(str(problem)) from exc
        records.append(record_from_json(data, file=str(path), line=lineno))
    return records


def write_jsonl(path: Path, records: Iterable[TestRecord]) -> None:
    """Write records one JSON object per line, atomically."""
    atomic_write_text(path, "".join(_lines(records)))


def _lines(records: Iterable[TestRecord]) -> Iterator[str]:
    for record in records:
        yield json.dumps(record.to_json(), sort_keys=True) + "\n"


def counts(records: Iterable[TestRecord]) -> dict[str, int]:
    """Outcome -> number of records, every outcome present (zeros included)."""
    out = dict.fromkeys(OUTCOMES, 0)
    for record in records:
        out[record.outcome] += 1
    return out
