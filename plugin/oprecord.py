"""The capture file the op-capture plugin writes and the op map reads: one record per line.

``--curate-capture-ops FILE`` appends one :class:`OpRecord` (JSON) per instantiated test:
``source="captured"`` when the test ran under the op-recording dispatch mode (the aten ops
it dispatched and its outcome), ``source="compile"`` beside it when the test compiled (the
aten ops of the graphs it compiled, plugin/compile_capture.py), ``source="static"`` under ``--collect-only`` (the OpInfo
op, and the aten op behind it). Under pytest-xdist each worker writes its own part
``FILE.gw0``, ``FILE.gw1``...: :func:`capture_parts` finds them, :func:`read_records` reads
one file. :func:`op_name` is how a record spells an op it was handed as a live operator,
:func:`merge_outcome` the outcome it gives a test from pytest's reports.
This module needs no torch and no pytest.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testcurator.errors import BadInputError, Location
from testcurator.vocab import normalize_op

if TYPE_CHECKING:
    import pytest

SOURCES = ("captured", "compile", "static")


def op_name(func: Any) -> str:
    """``aten.add.Tensor`` (an OpOverload) -> ``aten::add.Tensor``; ``cond`` (a
    higher-order operator, which has no namespace in its name) -> ``higher_order::cond``.

    The spelling a record's ``aten`` and ``calls`` use, for the eager recorder (capture.py)
    and the compiled graphs' nodes (compile_capture.py) alike; it reads the op's name and
    imports no torch.
    """
    name = getattr(func, "name", None)
    text = name() if callable(name) else str(func)
    if "::" not in text:
        text = f"higher_order::{text}"
    return text[: -len(".default")] if text.endswith(".default") else text


@dataclass(frozen=True)
class OpRecord:
    """One line of a capture file: one instantiated test and the ops it uses."""

    nodeid: str
    generic: str
    source: str
    device: str | None = None
    dtype: str | None = None
    op: str | None = None
    module: str | None = None
    aten: tuple[str, ...] = ()
    outcome: str | None = None
    error: str | None = None  # what went wrong with the capture itself, not the test
    failure: str | None = None  # the test's own failure on CPU: its exception line (captured records)
    calls: tuple[str, ...] = ()  # call keys (op + input dtypes), captured records only
    # Of those calls' ops, the ones a tensor of another layout than strided marks
    # (callspec.layout_op): read where the calls were made, which has torch to read their
    # schemas; the run's driver, which reads the records, does not import torch.
    layouts: tuple[str, ...] = ()
    examples: Mapping[str, str] = field(default_factory=dict)  # call key -> replayable example (JSON)
    # Calls that raised every time the test made them (it made them to see them fail: an
    # argument check the test expects on CPU); captured records only.
    raised: tuple[str, ...] = ()
    # It failed under the capture's dispatch mode and not in a plain rerun: ``outcome`` and
    # ``failure`` are the rerun's (``--curate-capture-confirm``), the ops the mode's.
    mode_failure: bool = False
    # Seconds the plain rerun of a failure took (pytest's report durations): the test's own
    # run time, which the capture spent besides the first run's.
    rerun_s: float | None = None

    def to_json(self) -> str:
        data = {**asdict(self), "aten": list(self.aten), "calls": list(self.calls), "layouts": list(self.layouts),
                "examples": dict(self.examples), "raised": list(self.raised)}
        if not self.layouts:
            del data["layouts"]
        if not self.mode_failure:  # the rare cases only: a capture file holds thousands of lines
            del data["mode_failure"]
        if self.rerun_s is None:
            del data["rerun_s"]
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, data: Any, where: Location) -> OpRecord:
        if not isinstance(data, dict):
            raise BadInputError(f"{where}: expected a JSON object, got {type(data).__name__}")
        missing = [k for k in ("nodeid", "generic", "source") if not data.get(k)]
        if missing:
            raise BadInputError(f"{where}: missing field(s) {', '.join(missing)}")
        if data["source"] not in SOURCES:
            raise BadInputError(f"{where}: source must be one of {SOURCES}, got {data['source']!r}")
        known = {k: data.get(k) for k in cls.__dataclass_fields__
                 if k not in ("aten", "calls", "layouts", "examples", "raised", "mode_failure", "rerun_s")}
        aten, calls, raised = data.get("aten") or [], data.get("calls") or [], data.get("raised") or []
        layouts = data.get("layouts") or []
        for name, value in (("aten", aten), ("calls", calls), ("layouts", layouts), ("raised", raised)):
            if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
                raise BadInputError(f"{where}: {name} must be a list of strings")
        examples = data.get("examples") or {}
        if not isinstance(examples, dict) or not all(isinstance(v, str) for v in examples.values()):
            raise BadInputError(f"{where}: examples must map call keys to JSON strings")
        rerun_s = data.get("rerun_s")
        if rerun_s is not None and (isinstance(rerun_s, bool) or not isinstance(rerun_s, (int, float))):
            raise BadInputError(f"{where}: rerun_s must be a number of seconds, got {rerun_s!r}")
        return cls(**known, aten=tuple(sorted({normalize_op(a) for a in aten})), calls=tuple(sorted(set(calls))),
                   layouts=tuple(sorted(set(layouts))), examples=examples, raised=tuple(sorted(set(raised))),
                   mode_failure=data.get("mode_failure") is True, rerun_s=None if rerun_s is None else float(rerun_s))


def merge_outcome(previous: str | None, report: pytest.TestReport) -> str:
    """One outcome per test from its three phases; the first phase that is not a pass wins.

    The ``outcome`` of a record, eager (capture.py) and compiled (compile_capture.py) alike;
    it reads the report's attributes only, so this module still needs no pytest to run.
    """
    if previous is not None and previous != "passed":
        return previous
    if hasattr(report, "wasxfail"):
        return "xpassed" if report.passed else "xfailed"
    if report.failed:
        return "failed" if report.when == "call" else "error"
    return "skipped" if report.skipped else "passed"


def capture_parts(path: Path) -> list[Path]:
    """``FILE`` and its xdist worker parts ``FILE.gw*`` that exist."""
    parts = [path] if path.is_file() else []
    return parts + sorted(p for p in path.parent.glob(f"{path.name}.gw*") if p.is_file())


def read_records(path: Path) -> Iterator[OpRecord | None]:
    """Records of one file; ``None`` for a truncated last line (a run killed mid-write)."""
    with open(path, encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = Location(str(path), lineno)
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                if not line.endswith("\n"):
                    warnings.warn(f"{where}: ignoring a truncated last line", RuntimeWarning, stacklevel=2)
                    yield None
                    continue
                raise BadInputError(f"{where}: not valid JSON ({exc.msg})") from None
            yield OpRecord.from_json(data, where)
