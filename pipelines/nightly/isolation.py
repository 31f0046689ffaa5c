"""Which of the draft's tests run in a forked process of their own (plugin/isolate.py).

The probe replays each captured call on the device; a call that kills the process there
(OpenReg: ``aten::_conj`` in complex64, ``aten::nonzero.out``) would take a pytest worker
with it in the draft, and the worker's replacement collects the selection again. So each
test of a dtype such a call had runs in a fork (:func:`~testcurator.memory.capability.crash_dtypes`).

A fork costs about 37 ms a test on OpenReg: 201 s of a 777 s run of 12 upstream files,
5,364 forked tests, where only 9 calls crashed. Of an instance whose calls the capture knows
(captured, or projected from its kind's captured dtype), whether it makes such a call is
known: one that makes none of an op (overload) the probe saw crash, at any dtype, runs in the
process. An instance no capture ran (over the budget) is not known, and stays forked; so is
one whose tier key (file, generic name, op, dtype, module) another instance shares that is
not known to be safe: the plugin tells the device's instances apart by that key alone.

And an instance whose calls include such an op is forked whatever its dtype: upstream
test_nonzero's int8 instance calls ``aten::nonzero.out``, which the probe saw crash in six
other dtypes and not in int8 (OpenReg's crash depends on the out tensor's shape). It killed
its worker in the draft, as did its int16 and uint8 instances, test_nonzero_astuple_out and
test_conj_view_with_shared_memory (six deaths with test_sort_restride's, six more in the
retry): each replacement collected the files again (5 to 10 s there) while one worker ran.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from testcurator.files import atomic_write_text
from testcurator.memory.capability import ProbeEvidence, crash_calls, crash_dtypes
from testcurator.memory.opmap import InstanceCalls
from testcurator.names import split_dtypes
from testcurator.plugin.callspec import split_key
from testcurator.tiers import tier_key
from testcurator.vocab import TestKey


@dataclass(frozen=True)
class Isolation:
    """The dtypes whose tests are forked, the tier keys of those that need not be, and of
    those forked whatever their dtype."""

    dtypes: frozenset[str] = frozenset()
    known: frozenset[str] = frozenset()
    also: frozenset[str] = frozenset()

    def write(self, folder: Path) -> tuple[Path | None, Path | None]:
        """The ``--curate-isolate-except`` and ``--curate-isolate-also`` files in ``folder``
        (None: no key to list)."""
        return _keys(folder / "isolate-except.keys", self.known), _keys(folder / "isolate-also.keys", self.also)


def _keys(path: Path, keys: frozenset[str]) -> Path | None:
    if not keys:
        return None
    atomic_write_text(path, "".join(f"{key}\n" for key in sorted(keys)))
    return path


def crashing_ops(evidence: Mapping[TestKey, ProbeEvidence]) -> frozenset[str]:
    """The op overloads of the calls whose replay killed the process (a hang is no crash)."""
    return frozenset(split_key(call)[0] for call in crash_calls(evidence))


def plan(evidence: Mapping[TestKey, ProbeEvidence], captured: Iterable[InstanceCalls],
         uncaptured: Iterable[InstanceCalls]) -> Isolation:
    """The draft's isolation from the probe's ``evidence``, the instances the capture ran
    (or projected) with their calls, and those it did not run."""
    dtypes = crash_dtypes(evidence)
    if not dtypes:
        return Isolation()
    ops = crashing_ops(evidence)
    safe: dict[str, bool] = {}
    also: set[str] = set()
    for inst, known in [*((i, True) for i in captured), *((i, False) for i in uncaptured)]:
        key = tier_key(TestKey.parse(inst.nodeid).file, inst.generic, inst.op, inst.dtype, inst.module)
        crashes = any(split_key(call)[0] in ops for call in (*inst.calls, *inst.raised))
        if crashes:
            also.add(key)
        if set(split_dtypes(inst.dtype)) & dtypes:
            safe[key] = safe.get(key, True) and known and not crashes
    return Isolation(dtypes, frozenset(key for key, ok in safe.items() if ok), frozenset(also))
