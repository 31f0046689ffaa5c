"""``enable-op`` consults the device's capability table before it admits a test.

A test held back only by OP is worth admitting when the device now runs what the test needs.
The capability table (memory/capability.py) knows, per call (op overload x input dtypes), what
replaying it on the device found; the op map knows which calls each captured instance of the
admitted tests made. Before admitting, :func:`check_admissions`:

- replays the calls those instances make that the table lacks for this backend and torch
  version (a new backend build starts an empty table, so a kernel just added is tried), only
  those: seconds, against the device time of running the tests;
- shows the table's rows for OP's own calls;
- refuses an admission whose admitted instances make a call the device still lacks (a missing
  kernel, an unsupported dtype, a crash, a wrong result): admitting it as mandatory would only
  make the CI red. For an ``@ops`` exclusion that is lifted, the admitted instances are OP's
  own; for a mode change, every captured instance the entry keeps.

A test the capture did not see (no captured calls) is admitted unchecked and said so;
``--execute`` stays the judge of what is admitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from testcurator.memory.capability import device_calls
from testcurator.memory.opmap import InstanceCalls, OpMap
from testcurator.pipelines.context import Say
from testcurator.pipelines.probe import ProbeTarget, run_probe
from testcurator.plugin.callspec import dispatch_op, split_key
from testcurator.runner.probe.replay import ProbeResult
from testcurator.names import split_dtypes
from testcurator.vocab import PROBE_GAPS, TestKey, op_excluded, op_key

MAX_SHOWN = 12


@dataclass(frozen=True)
class Admitting:
    """What :func:`check_admissions` needs of one admission: its test, and which of its
    instances it admits (``op``: only OP's OpInfo instances; None: every one it keeps)."""

    key: str
    op: str | None
    exclude_dtypes: tuple[str, ...] = ()
    exclude_ops: tuple[str, ...] = ()
    exclude_modules: tuple[str, ...] = ()
    run_dtypes: frozenset[str] | None = None  # the config's supported_dtypes: other dtypes do not run


@dataclass
class TableCheck:
    """The table's verdict on the admissions: OP's rows, the refused tests and why."""

    rows: dict[str, ProbeResult] = field(default_factory=dict)  # OP's calls the admitted tests make
    refused: dict[str, list[str]] = field(default_factory=dict)  # test key -> "call status" lines
    unchecked: list[str] = field(default_factory=list)  # admitted tests without captured calls
    replayed: int = 0


def op_calls(calls: Sequence[str], op: str) -> list[str]:
    """The calls of ``calls`` to OP (any overload: ``sort`` has ``aten::sort.values_stable``)."""
    base = op_key(op).split(".", 1)[0]
    return [c for c in calls if dispatch_op(split_key(c)[0]).partition("::")[2].split(".", 1)[0] == base]


def _instances(state_dir: Path, keys: set[str]) -> dict[str, list[InstanceCalls]]:
    opmap = OpMap(state_dir)
    try:
        out: dict[str, list[InstanceCalls]] = {}
        for inst in map(device_calls, opmap.instance_calls()):
            key = str(TestKey.of(TestKey.parse(inst.nodeid).file, inst.generic))
            if key in keys and inst.calls:
                out.setdefault(key, []).append(inst)
        return out
    finally:
        opmap.close()


def _admitted(adm: Admitting, rows: Sequence[InstanceCalls], op: str) -> list[InstanceCalls]:
    return [i for i in rows if (adm.op is None or i.op == op_key(op)) and i.dtype not in adm.exclude_dtypes
            and not op_excluded(i.op, split_dtypes(i.dtype), adm.exclude_ops) and i.module not in adm.exclude_modules
            and (adm.run_dtypes is None or i.dtype is None or i.dtype in adm.run_dtypes)]


def check_admissions(admitting: Sequence[Admitting], op: str, backend: Path, state_dir: Path, say: Say) -> TableCheck:
    """Replay what the table lacks of the admitted instances' calls; refuse where one fails."""
    by_key = _instances(state_dir, {a.key for a in admitting})
    needed = {adm.key: _admitted(adm, by_key.get(adm.key, []), op) for adm in admitting}
    calls = {c for rows in needed.values() for i in rows for c in i.calls}
    check = TableCheck(unchecked=sorted(a.key for a in admitting if not needed[a.key]))
    target = ProbeTarget.load(backend, state_dir)
    if calls:
        figures = run_probe(target, only=calls, say=say)
        check.replayed = figures["replayed"]
    with target.table() as table:
        results = {k: r for k, r in table.results().items() if k in calls}
    check.rows = {c: results[c] for c in op_calls(sorted(results), op)}
    for key, rows in needed.items():
        failing = sorted({c for i in rows for c in i.calls if c in results and results[c].status in PROBE_GAPS})
        if failing:
            check.refused[key] = [f"{c} {results[c].status}" for c in failing]
    _show(check, op, say)
    return check


def _show(check: TableCheck, op: str, say: Say) -> None:
    if check.rows:
        say(f"capability table, calls to {op_key(op)} the admitted tests make ({check.replayed} call(s) replayed now):")
        for call, r in list(check.rows.items())[:MAX_SHOWN]:
            first = r.error.splitlines()[0][:120] if r.error else ""
            say(f"  {r.status:<17} {call}" + (f": {first}" if first else ""))
        if len(check.rows) > MAX_SHOWN:
            say(f"  ... {len(check.rows) - MAX_SHOWN} more")
    for key, lines in sorted(check.refused.items()):
        say(f"not admitted: {key}: the device still lacks {', '.join(lines[:3])}"
            + (f" and {len(lines) - 3} more" if len(lines) > 3 else ""))
    if check.unchecked:
        say(f"warning: {len(check.unchecked)} admitted test(s) have no captured calls, so the capability table "
            f"could not check them: {', '.join(check.unchecked[:5])}")


def refused_reason(lines: Sequence[str]) -> str:
    """The ``also`` of a refused admission in ``EnableResult.still_held``."""
    return "device lacks " + ", ".join(lines[:3]) + (f" and {len(lines) - 3} more" if len(lines) > 3 else "")
