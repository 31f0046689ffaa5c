"""What the memory stage hands the bucket stage: per test, the evidence collection and the
CPU op capture found.

:func:`gather` folds capture records (one per instance, :mod:`testcurator.plugin.oprecord`)
into one :class:`TestEvidence` per device-generic test; :func:`write_evidence` and
:func:`read_evidence` keep it in the run directory as ``evidence.json``:

    {"test/test_ops.py::TestCommon::test_out": {"ops": [...], "dtypes": [...],
     "modules": [...], "aten": [...], "instances": [...], "cpu": {"<node id>": "passed"}}}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from testcurator.errors import BadInputError
from testcurator.files import atomic_write_text
from testcurator.names import split_dtypes
from testcurator.plugin.oprecord import OpRecord
from testcurator.vocab import FAILING, TestKey

T = TypeVar("T")
_LISTS = ("aten", "dtypes", "instances", "layouts", "modules", "ops")


@dataclass(frozen=True)
class TestEvidence:
    """One device-generic test: the OpInfo ops, dtypes and ModuleInfos it is instantiated
    over, the aten ops its instances dispatched on CPU, its instances' node ids, and each
    captured instance's outcome on CPU (node id -> outcome), and the first CPU failure's
    exception line (when one failed); ``cpu_failed``: the (dtype, op, module) of each captured
    instance that failed there, '' for none, so that a rule can tell whether an edit leaves any.
    ``layouts``: the calls it made with a tensor of another layout than strided, as op and
    marker (``aten::_indices[sparse_coo]``, :func:`~testcurator.plugin.callspec.layout_op`):
    the sparse tensor a test builds can show in its call keys alone, not in ``aten``'s op names
    (OpenReg's test_embedding_bag_1D_padding_idx)."""

    __test__ = False  # not a pytest test class, despite the name

    ops: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    aten: tuple[str, ...] = ()
    instances: tuple[str, ...] = ()
    layouts: tuple[str, ...] = ()
    cpu: Mapping[str, str] = field(default_factory=dict)
    cpu_failure: str = ""
    cpu_failed: tuple[tuple[str, str, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = {**{name: list(getattr(self, name)) for name in _LISTS}, "cpu": dict(self.cpu)}
        if self.cpu_failed:
            out["cpu_failed"] = [list(kind) for kind in self.cpu_failed]
        return {**out, "cpu_failure": self.cpu_failure} if self.cpu_failure else out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TestEvidence:
        return cls(**{name: tuple(data.get(name, ())) for name in _LISTS}, cpu=dict(data.get("cpu", {})),
                   cpu_failure=str(data.get("cpu_failure") or ""),
                   cpu_failed=tuple((str(d), str(o), str(m)) for d, o, m in data.get("cpu_failed", ())))


def gather(records: Iterable[OpRecord]) -> dict[TestKey, TestEvidence]:
    """One :class:`TestEvidence` per ``file::generic`` of the records, lists sorted."""
    found: dict[TestKey, dict[str, Any]] = {}
    dtypes: dict[str | None, tuple[str, ...]] = {}  # a tree has a few dozen dtype names, not one per record
    for rec in records:
        key = TestKey.of(TestKey.parse(rec.nodeid).file, rec.generic)
        entry = found.get(key)
        if entry is None:  # not setdefault: its default would be built for every record
            entry = found[key] = {**{name: set() for name in _LISTS}, "cpu": {}, "failures": {}, "failed": set()}
        entry["instances"].add(rec.nodeid)
        for name, value in (("ops", rec.op), ("modules", rec.module)):
            if value:
                entry[name].add(value)
        members = dtypes.get(rec.dtype)
        if members is None:
            members = dtypes[rec.dtype] = split_dtypes(rec.dtype)
        entry["dtypes"].update(members)  # each member of a dtype pair
        if rec.source == "captured":
            entry["aten"].update(rec.aten)
            entry["layouts"].update(rec.layouts)
            if rec.outcome:
                entry["cpu"][rec.nodeid] = rec.outcome
                if rec.outcome in FAILING:
                    entry["failed"].add((rec.dtype or "", rec.op or "", rec.module or ""))
            if rec.failure:
                entry["failures"][rec.nodeid] = rec.failure
    return {key: TestEvidence(**{name: tuple(sorted(entry[name])) for name in _LISTS},
                              cpu=dict(sorted(entry["cpu"].items())),
                              cpu_failure=entry["failures"][min(entry["failures"])] if entry["failures"] else "",
                              cpu_failed=tuple(sorted(entry["failed"])))
            for key, entry in sorted(found.items())}


def write_keyed(path: Path, items: Mapping[TestKey, Any]) -> Path:
    """``{test key: item.to_json()}`` at ``path``, atomically, keys sorted (the run
    directory's per-test files: evidence, probe evidence).

    One test per line, each through the C encoder: ``indent`` sends all of it through the
    pure-Python one, most of the evidence step's time at 100,000 instances. The same JSON
    value as before; still a line per test to grep or diff."""
    data = {str(key): value.to_json() for key, value in items.items()}
    lines = [f"{json.dumps(key)}: {json.dumps(data[key], sort_keys=True)}" for key in sorted(data)]
    atomic_write_text(path, "{\n" + ",\n".join(lines) + "\n}\n" if lines else "{}\n")
    return path


def read_keyed(path: Path, from_json: Callable[[Any], T]) -> dict[TestKey, T]:
    """What :func:`write_keyed` wrote, each item through ``from_json``; none when the file
    does not exist."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BadInputError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None
    return {TestKey.parse(key): from_json(value) for key, value in data.items()}


def write_evidence(path: Path, evidence: Mapping[TestKey, TestEvidence]) -> Path:
    """``evidence.json`` at ``path``, atomically (keys and lists sorted)."""
    return write_keyed(path, evidence)


def read_evidence(path: Path) -> dict[TestKey, TestEvidence]:
    """The evidence written by :func:`write_evidence`; none when the file does not exist."""
    return read_keyed(path, TestEvidence.from_json)
