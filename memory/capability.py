"""The device's capability table: per call (op overload x input dtypes), what the probe found.

Kept in ``state_dir / "capability.sqlite"``, one table per (backend version, torch version):
a probe with the same backend and torch reuses every row and replays only calls it has not
seen; a new backend build or torch release starts an empty table (older ones stay, for
comparison). The backend version is the backend digest (memory/run_identity.py: the profile,
the backend's source and installed files, the environment that changes what it does) with the
probe's replay rules (:func:`backend_version`): editing the backend, rebuilding it or changing
its op allowlist makes a new one.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from testcurator.errors import MemoryStoreError
from testcurator.memory.evidence import read_keyed, write_keyed
from testcurator.memory.opmap import InstanceCalls, OpMap
from testcurator.plugin.callspec import is_host_call, is_raise_call, raised_call, split_key
from testcurator.runner.probe.replay import REPLAY_VERSION, ProbeResult
from testcurator.names import split_dtypes
from testcurator.runner.results.classify import MISSING_KERNEL
from testcurator.vocab import PROBE_GAPS, TestKey

CAPABILITY_DB = "capability.sqlite"
SCHEMA_VERSION = 1
_SCHEMA = f"""
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS capability (
    backend_version TEXT NOT NULL, torch_version TEXT NOT NULL, call TEXT NOT NULL, op TEXT NOT NULL,
    dtypes TEXT NOT NULL, status TEXT NOT NULL, error TEXT NOT NULL, seconds REAL NOT NULL,
    PRIMARY KEY (backend_version, torch_version, call));
INSERT INTO schema_version SELECT {SCHEMA_VERSION} WHERE NOT EXISTS (SELECT 1 FROM schema_version);
COMMIT;
"""


def backend_version(backend_digest: str) -> str:
    """The table's key for a backend: its digest (memory/run_identity.py: profile, sources,
    installed module, behaviour environment) and the probe's replay rules (a table they
    filled differently is not reused)."""
    return hashlib.sha256(f"replay/{REPLAY_VERSION}\0{backend_digest}".encode()).hexdigest()[:16]


class CapabilityTable:
    """The rows of one (backend version, torch version)."""

    def __init__(self, state_dir: Path, backend: str, torch_version: str) -> None:
        self.path = Path(state_dir) / CAPABILITY_DB
        self.backend, self.torch = backend, torch_version
        self._conn: sqlite3.Connection | None = None

    def __enter__(self) -> CapabilityTable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30)
            try:
                conn.executescript(_SCHEMA)
                row = conn.execute("SELECT version FROM schema_version").fetchone()
            except sqlite3.DatabaseError as exc:
                conn.close()
                raise MemoryStoreError(f"{self.path}: not a readable capability table ({exc}); hint: delete it and "
                                       "run `testcurator probe` again") from exc
            if row[0] != SCHEMA_VERSION:
                conn.close()
                raise MemoryStoreError(f"{self.path}: schema version {row[0]}, expected {SCHEMA_VERSION}")
            self._conn = conn
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def store(self, results: Iterable[ProbeResult]) -> int:
        rows = [(self.backend, self.torch, r.call, split_key(r.call)[0], ",".join(split_key(r.call)[1]), r.status,
                 r.error, r.seconds) for r in results]
        with self.conn as conn:  # one transaction
            conn.executemany("INSERT OR REPLACE INTO capability VALUES (?,?,?,?,?,?,?,?)", rows)
        return len(rows)

    def results(self) -> dict[str, ProbeResult]:
        """Every call probed for this backend and torch -> its result."""
        if not self.path.exists():
            return {}
        rows = self.conn.execute("SELECT call, status, error, seconds FROM capability WHERE backend_version=? AND "
                                 "torch_version=? ORDER BY call", (self.backend, self.torch))
        return {c: ProbeResult(c, s, e, t) for c, s, e, t in rows}

    def gaps(self) -> dict[str, ProbeResult]:
        """The calls the device lacks (statuses in PROBE_GAPS)."""
        return {k: r for k, r in self.results().items() if r.status in PROBE_GAPS}


# --- per test: what the table says about the calls each test made ------------------------------
@dataclass(frozen=True)
class ProbedInstance:
    """One captured instance of a test: its dtype, OpInfo op and ModuleInfo, and the calls it
    made that the device lacks (empty: every call it made works or was not probed)."""

    dtype: str | None
    op: str | None
    module: str | None = None
    gaps: tuple[str, ...] = ()
    raised: tuple[str, ...] = ()  # of ``gaps``, the calls it made only to see them raise on CPU


@dataclass(frozen=True)
class ProbeEvidence:
    """What the capability table says about one device-generic test.

    ``gaps``: the failing calls any instance made -> (status, error); ``instances``: every
    captured instance; ``works`` / ``not_probed``: how many distinct calls of the test ran on
    the device / could not be replayed."""

    gaps: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    instances: tuple[ProbedInstance, ...] = ()
    works: int = 0
    not_probed: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"gaps": {k: list(v) for k, v in sorted(self.gaps.items())}, "works": self.works,
                "not_probed": self.not_probed,
                "instances": [[i.dtype, i.op, i.module, list(i.gaps), list(i.raised)] for i in self.instances]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProbeEvidence:
        return cls(gaps={k: (v[0], v[1]) for k, v in data.get("gaps", {}).items()},
                   instances=tuple(ProbedInstance(d, o, m, tuple(g), tuple(r[0] if r else ()))
                                   for d, o, m, g, *r in data.get("instances", ())),
                   works=int(data.get("works", 0)), not_probed=int(data.get("not_probed", 0)))


def device_calls(inst: InstanceCalls) -> InstanceCalls:
    """``inst`` with the calls the device's capabilities decide: all of a device-generic
    instance's; a plain test's host calls only (see :func:`probe_evidence`)."""
    return inst if inst.device is not None else replace(inst, calls=tuple(c for c in inst.calls if is_host_call(c)))


def probe_evidence(opmap: OpMap, results: Mapping[str, ProbeResult],
                   tests: Collection[TestKey] | None = None) -> dict[TestKey, ProbeEvidence]:
    """Per ``file::Class::test`` with captured calls (of ``tests``, when given), what the
    table says about them.

    A plain test (no device parameter) is judged on its host calls only (callspec.HOST_CALLS:
    pinning, which goes through the backend loaded in the process): its other calls ran on
    CPU in the capture and run on CPU on the backend's CI too, so the device's gaps do not
    touch them.

    An @ops instance no capture ran (the budget leaves most of test_unary_ufuncs' 25,595 out)
    makes, as far as is known, the calls every captured instance of its OpInfo op makes in any
    test and that have no kernel on the device (or a dtype it lacks that is not the instance's
    own: :func:`_op_level`): upstream ``_refs.exp2`` calls ``aten::exp2.out``
    in each of its 4 captured tests, so test_contig_size1's uncaptured ``_refs.exp2`` variants
    are excluded as the probe's, where they failed in the draft with unsupported_op. So does a
    @modules instance, with the calls of its ModuleInfo's captured instances that reach any
    such call (a module's test need not run it: test_repr; holdout test_modules' ``test_errors``
    of ``nn.NLLLoss`` lacks ``nll_loss_forward``). An @ops instance also makes the calls that
    crash, raise or go wrong on the device that every captured instance of its op at its own
    dtype makes (:func:`_dtype_level`). Only for a test with captured instances: of a test none
    of whose instances ran, too little is known."""
    kernelless = kernelless_ops(results)
    memo: dict[str, tuple[str, str] | None] = {}

    def known(call: str) -> tuple[str, str] | None:  # each call's status once, for both loops below
        if call not in memo:
            memo[call] = _known(call, results, kernelless)
        return memo[call]

    per_test: dict[TestKey, list[InstanceCalls]] = {}
    seen_of: dict[tuple[str, str], list[tuple[dict[str, str], set[str]]]] = {}  # (op|module, name) -> per instance
    seen_at: dict[tuple[str, str, str], list[tuple[dict[str, str], set[str]]]] = {}  # (op, name, dtype) -> ...
    for inst in (_twins_for_raised(device_calls(i), known) for i in opmap.instance_calls()):
        key = TestKey.of(TestKey.parse(inst.nodeid).file, inst.generic)
        subject = _subject(inst)
        if subject[1] and inst.device is not None and inst.calls:
            mine = {split_key(c)[0]: c for c in inst.calls if c not in inst.raised and _op_level(c, known(c), inst)}
            # A module's tests need not run it (test_repr prints it): only those that reach a
            # gap of it say what running it needs.
            if mine or subject[0] == "op":
                seen_of.setdefault(subject, []).append((mine, _own_dtype_gaps(inst, known)))
            if subject[0] == "op" and inst.dtype:
                seen_at.setdefault((*subject, inst.dtype), []).append((_dtype_level(inst, known), set()))
        if inst.calls and (tests is None or key in tests):
            per_test.setdefault(key, []).append(inst)
    needs_of = {subject: _shared_needs(seen) for subject, seen in seen_of.items()}
    needs_at = {at: _shared_needs(seen) for at, seen in seen_at.items()}
    for inst in opmap.uncaptured_instances():
        key = TestKey.of(TestKey.parse(inst.nodeid).file, inst.generic)
        subject = _subject(inst)
        needs = {**needs_at.get((*subject, inst.dtype or ""), {}), **needs_of.get(subject, {})}
        if key in per_test and needs:
            per_test[key].append(replace(inst, calls=tuple(sorted(needs.values()))))
    out: dict[TestKey, ProbeEvidence] = {}
    for key, rows in sorted(per_test.items()):
        used = {c for inst in rows for c in inst.calls}
        found = {c: known(c) for c in used}
        status = {c: r[0] if r is not None else "not_probed" for c, r in found.items()}
        gaps = {c: r for c, r in found.items() if r is not None and r[0] in PROBE_GAPS}
        out[key] = ProbeEvidence(
            gaps=gaps, works=sum(s == "works" for s in status.values()),
            not_probed=sum(s == "not_probed" for s in status.values()),
            instances=tuple(ProbedInstance(i.dtype, i.op, i.module, tuple(c for c in i.calls if c in gaps),
                                           tuple(c for c in i.calls if c in gaps and c in i.raised))
                            for i in rows))
    return out


def _twins_for_raised(inst: InstanceCalls, known: Callable[[str], tuple[str, str] | None]) -> InstanceCalls:
    """``inst`` with each call it made only to see it raise replaced by its raising twin
    (callspec.raise_call), where the probe replayed the twin: whether the device raises the
    same error is what the test checks, not whether the call runs (upstream test_polygamma_neg's
    ``polygamma(-1, x)`` raises its message on curatedev too, before the missing kernel). A twin
    the probe could not replay is dropped, and the call it stands for kept."""
    replayed = {c for c in inst.calls if is_raise_call(c) and known(c) is not None}
    superseded = {raised_call(c)[0] for c in replayed} & set(inst.raised)
    calls = tuple(c for c in inst.calls if c not in superseded and (not is_raise_call(c) or c in replayed))
    return inst if calls == inst.calls else replace(inst, calls=calls)


def _subject(inst: InstanceCalls) -> tuple[str, str]:
    """What an instance is an instance of beyond its test: its OpInfo op, else its ModuleInfo."""
    return ("op", inst.op) if inst.op else ("module", inst.module) if inst.module else ("", "")


def _own_dtype_gaps(inst: InstanceCalls, known: Callable[[str], tuple[str, str] | None]) -> set[str]:
    """Overloads whose call by ``inst`` lacks the instance's own dtype on the device: the
    profile skips such an instance, and whether it would reach the op-level gap that a
    supported dtype's instance makes is not known (upstream ``double``'s float64 instances
    compare float64 results as its float32 ones do, on an ``eq`` without float64)."""
    own = set(split_dtypes(inst.dtype))
    return {split_key(c)[0] for c in inst.calls
            if (known(c) or ("", ""))[0] == "unsupported_dtype" and set(split_key(c)[1]) & own}


def _shared_needs(seen: Sequence[tuple[dict[str, str], set[str]]]) -> dict[str, str]:
    """The op-level gaps (overload -> call) every captured instance of a subject reaches, an
    instance that reaches an overload only in its own unsupported dtype counting as unknown,
    not as a counterexample; whatever the order the instances come in."""
    found: dict[str, str] = {}
    for mine, _ in seen:
        for overload, call in mine.items():
            found.setdefault(overload, call)
    return {o: c for o, c in found.items() if all(o in mine or o in own for mine, own in seen)}


# The gaps of one dtype an uncaptured instance inherits; not unsupported_dtype: an instance of a
# dtype the device lacks is skipped by the profile already (config/apply.py).
_AT_DTYPE = frozenset(PROBE_GAPS) - {"missing_kernel", "unsupported_dtype"}


def _dtype_level(inst: InstanceCalls, known: Callable[[str], tuple[str, str] | None]) -> dict[str, str]:
    """The gaps (overload -> call) ``inst`` reaches at its own dtype that are not the op's at
    every dtype: upstream ``masked.std`` calls ``aten::_conj`` in complex64 only, which kills
    OpenReg's process; every captured complex64 instance of it (test_reference_masked, in two
    files) makes that call, so the complex64 instances the budget left out in five other tests
    of test_reductions make it too, as far as is known."""
    return {split_key(c)[0]: c for c in inst.calls if c not in inst.raised and (known(c) or ("", ""))[0] in _AT_DTYPE}


def _op_level(call: str, known: tuple[str, str] | None, inst: InstanceCalls) -> bool:
    """Whether ``call``'s gap (``known``: its status and error) belongs to the OpInfo op whatever
    the instance's dtype: a missing kernel, or a dtype the device lacks that is not the
    instance's own (a conversion op: upstream ``byte`` compares its uint8 result,
    ``eq.Tensor(uint8,uint8)``, in every dtype)."""
    status = known[0] if known is not None else ""
    if status == "missing_kernel":
        return True
    return status == "unsupported_dtype" and not set(split_key(call)[1]) & set(split_dtypes(inst.dtype))


def kernelless_ops(results: Mapping[str, ProbeResult]) -> dict[str, str]:
    """Op overload -> the replay error in which the dispatcher said it has no kernel for the
    device (``Could not run 'aten::frexp.Tensor_out' with arguments from the 'curatedev'
    backend``): no call of that overload runs there, whatever its dtypes."""
    out: dict[str, str] = {}
    for _, result in sorted(results.items()):
        match = MISSING_KERNEL.search(result.error or "") if result.status == "missing_kernel" else None
        if match is not None:
            out.setdefault(match.group("op"), result.error)
    return out


def _known(call: str, results: Mapping[str, ProbeResult], kernelless: Mapping[str, str]) -> tuple[str, str] | None:
    """(status, error) of ``call``: its own replay's; else, for a call that could not be
    replayed (on upstream test_unary_ufuncs, test_frexp_assert_raises' out= calls of the wrong
    dtype, which raise on CPU), a missing kernel another replay named; else None (not probed)."""
    result = results.get(call)
    if result is not None and result.status != "not_probed":
        return result.status, result.error
    error = kernelless.get(split_key(call)[0])
    return ("missing_kernel", error) if error is not None else None


def crash_calls(evidence: Mapping[TestKey, ProbeEvidence]) -> frozenset[str]:
    """The calls whose replay killed the process (a hang is no crash here: the bucket skips a
    test that makes one)."""
    return frozenset(call for ev in evidence.values() for call, (status, error) in ev.gaps.items()
                     if status == "crash" and not error.startswith("hang"))


def crash_dtypes(evidence: Mapping[TestKey, ProbeEvidence]) -> frozenset[str]:
    """The input dtypes of :func:`crash_calls`. The draft runs each test of them in a forked
    process (plugin/isolate.py) unless its calls are known to include none of those ops."""
    return frozenset(dtype for call in crash_calls(evidence) for dtype in split_key(call)[1])


def write_probe_evidence(path: Path, evidence: Mapping[TestKey, ProbeEvidence]) -> Path:
    return write_keyed(path, evidence)


def read_probe_evidence(path: Path) -> dict[TestKey, ProbeEvidence]:
    """What :func:`write_probe_evidence` wrote; nothing when the run did not probe."""
    return read_keyed(path, ProbeEvidence.from_json)
