"""Each instance the run holds back, put on the gaps that hold it back, or left unattributed.

An instance is *held back* when the final configs skip or xfail it (the verification's records;
a run that verified nothing: the draft's skips and failures; a run that executed nothing: what
its decisions hold back of the device's collection). Why, in this order:

1. not the device's doing: the profile's preferences, another device's decorator (``@onlyCUDA``),
   upstream's own skip, or the test skipping itself; these belong to no gap;
2. a dtype the profile does not declare (``supported_dtypes``): the gap is the dtype;
3. execution (the draft ran the instance and it failed): the missing kernel its error names,
   the probe's crashing call behind a crash, a view returned as a copy, a missing feature
   (pipelines/gaps/derive.py);
4. the probe: every call the instance made (from the CPU capture) that the capability table
   says the device lacks, at the dtypes it made it; a missing kernel is put on the op the
   device's error names (``aten::native_layer_norm`` that fails with "Could not run
   'aten::native_batch_norm'" is a gap of ``aten::native_batch_norm``), overloads under their
   op (``aten::add.out`` under ``aten::add``).

Execution and the probe add up: the draft reports an instance's first failure, the probe every
call the device lacks. What none of them explains is *unattributed*, with its reason; so is a
test that fails on CPU too (its reason says the failure is not the backend's, or its instance
failed in the CPU capture).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from testcurator.agents.decision import Decision
from testcurator.names import split_dtypes
from testcurator.pipelines.gaps import derive
from testcurator.pipelines.gaps.sources import RunSources, record_key, record_kind
from testcurator.plugin.callspec import is_write_call, split_key, twin_call
from testcurator.runner.results.classify import classify
from testcurator.runner.results.records import TestRecord
from testcurator.vocab import FAILING, NOT_RUN, PROBE_GAPS, TestKey, op_base

#: A gap's kinds: an ATen op (``aten::dot``), a feature outside the dispatcher, a dtype.
OP, FEATURE, DTYPE = "op", "feature", "dtype"
VIEW_COPY = "view_copy"  # the status of a view returned as a copy (derive.py)
# How the plugin cites the config that skipped an instance: ``(configs/test/x.yaml:17:11)``.
_CONFIG_SKIP = re.compile(r"\([^()\n]*\.ya?ml(?::\d+:\d+)?\)")
_ATEN = re.compile(r"aten::[\w.]*\w")
_NOT_THE_BACKEND = "the failure is not the backend's"  # refine's words for a failure CPU shares (agents/offline)
_NOT_DEVICE_EVIDENCE = (("preference `", "the profile's preferences"), ("file: ", "a device-specific file"))


@dataclass(frozen=True, order=True)
class GapId:
    kind: str
    name: str

    def __str__(self) -> str:
        return self.name if self.kind != DTYPE else f"dtype {self.name}"


@dataclass(frozen=True)
class Hit:
    """One gap holding an instance back: its status, the dtypes it shows at, what says so."""

    gap: GapId
    status: str
    dtypes: tuple[str, ...]
    detail: str  # the call (``aten::dot(float32,float32)``) or the evidence line
    source: str  # execution | probe | profile


@dataclass(frozen=True)
class Held:
    """One held-back instance: ``hits`` the gaps on it; none: ``why`` it is held back."""

    key: str  # the instance key (vocab.instance_key)
    test: TestKey
    dtype: str | None
    op: str | None
    module: str | None
    outcome: str
    skip_text: str
    device: bool  # held back by the device (else by a preference, a decorator, the test itself)
    hits: tuple[Hit, ...] = ()
    why: str = ""
    op_variant: str | None = None  # the OpInfo's variant (floor_rounding of div)

    @property
    def gaps(self) -> frozenset[GapId]:
        return frozenset(h.gap for h in self.hits)


def _held(rec: TestRecord, verified: bool) -> bool:
    held = NOT_RUN if verified else NOT_RUN | FAILING
    return rec.outcome in held and bool(rec.generic)


def _first_line(text: str | None) -> str:
    return next((line.strip() for line in (text or "").splitlines() if line.strip()), "")


def _not_device(rec: TestRecord, dec: Decision | None, device: str, executed: bool) -> str | None:
    """Why ``rec`` is held back by something other than the device, or None. Upstream's own
    word about this device (``@skipPRIVATEUSE1``, ``@expectedFailure`` naming it) is the
    device's: its tests stay on the board, unattributed."""
    reason = dec.reason if dec is not None else ""
    if dec is not None and dec.mode == "skip":
        for prefix, what in _NOT_DEVICE_EVIDENCE:
            if any(e.startswith(prefix) for e in dec.evidence):
                return f"{what}: {reason}"
        if dec.brain == "execution" or (any(e.startswith("decorator: ") for e in dec.evidence)
                                        and ("restricts it to" in reason or "on every device" in reason)):
            return f"another device's decorator, or upstream's own: {reason}"
    if reason.startswith("Xfail: upstream expects it to fail") and device not in reason.lower() \
            and "privateuse1" not in reason.lower():
        return f"upstream's own expectation: {reason}"
    if executed and rec.outcome == "skipped" and not _CONFIG_SKIP.search(rec.failure_text or ""):
        return f"skipped by the test itself: {_first_line(rec.failure_text).removeprefix('Skipped: ')}"
    return None


@lru_cache(maxsize=4096)
def _named_op(error: str) -> str | None:
    """The op a device error names (``Could not run 'aten::x'``), else None."""
    op = classify(error).op
    if op is None:
        found = _ATEN.search(error)
        op = found.group(0) if found else None
    return op_base(op) if op and op.startswith("aten::") else None


def _probe_hits(calls: frozenset[str], src: RunSources, undeclared: set[str]) -> Iterator[Hit]:
    for call in sorted(calls):
        result = src.probe.get(call)
        if result is None or result.status not in PROBE_GAPS:
            continue
        op, dtypes = split_key(twin_call(call))  # a twin's gap is its call's
        missing = [d for d in dtypes if src.declared_dtypes is not None and d not in src.declared_dtypes]
        if result.status == "unsupported_dtype" and missing:
            yield from (Hit(GapId(DTYPE, d), "unsupported_dtype", (d,), call, "probe") for d in missing)
            continue
        # A replay error that names a feature is that feature's gap, as the draft's failure with
        # the same line is (DLPack's __dlpack_device__, pinning's host allocator): one row, not two.
        if result.status == "error" and (feature := derive.feature_of(result.error)) is not None:
            yield Hit(GapId(FEATURE, feature.name), "error", tuple(sorted(set(dtypes))) or ("-",), call, "probe")
            continue
        named = _named_op(result.error) if result.status in ("missing_kernel", "unsupported_dtype") else None
        # A writing twin that is wrong is a view the device returns as a copy: the status
        # execution derives for the same gap (derive.py), now seen before anything ran.
        status = VIEW_COPY if is_write_call(call) and result.status == "wrong_result" else result.status
        yield Hit(GapId(OP, named or op_base(op)), status, tuple(sorted(set(dtypes))) or ("-",), call, "probe")


def _crash_elsewhere(calls: frozenset[str], src: RunSources) -> Iterator[Hit]:
    """A crash in the draft with no crashing call of its own in the table: its calls whose
    overload crashed at other dtypes there."""
    crashed = {split_key(c)[0] for c, r in src.probe.items() if r.status == "crash"}
    for call in sorted(calls):
        op, dtypes = split_key(call)
        if op in crashed:
            yield Hit(GapId(OP, op_base(op)), "crash", tuple(sorted(set(dtypes))) or ("-",),
                      f"{call}: crashed in the draft; the probe saw {op} crash at other dtypes", "execution")


def _execution_hits(rec: TestRecord, draft: TestRecord, calls: frozenset[str], src: RunSources,
                    probed: list[Hit]) -> Iterator[Hit]:
    cls, evidence = draft.failure_class, (draft.evidence or _first_line(draft.failure_text))
    where = split_dtypes(rec.dtype) or ("-",)
    named = _named_op(evidence) if cls in ("unsupported_op", "unsupported_dtype") else None
    if named:
        yield Hit(GapId(OP, named), "missing_kernel" if cls == "unsupported_op" else "unsupported_dtype", where,
                  evidence, "execution")
        return
    if cls in ("crash", "timeout") and not any(h.status == "crash" for h in probed):
        yield from _crash_elsewhere(calls, src)
    elif not probed and derive.looks_like_view_copy(cls, draft.failure_text or evidence, calls):
        for op in derive.view_copy_ops(TestKey.parse(rec.nodeid).test, calls):
            yield Hit(GapId(OP, op), VIEW_COPY, where, f"{evidence} (after writing through {op})", "execution")
    elif (feature := derive.feature_of(evidence)) is not None:
        yield Hit(GapId(FEATURE, feature.name), "error", where, evidence, "execution")


def _hits(rec: TestRecord, src: RunSources) -> list[Hit]:
    dtypes = split_dtypes(rec.dtype)
    undeclared = {d for d in dtypes if src.declared_dtypes is not None and d not in src.declared_dtypes}
    hits = [Hit(GapId(DTYPE, d), "unsupported_dtype", (d,), "not in the profile's supported_dtypes", "profile")
            for d in sorted(undeclared)]
    calls = src.calls.get(record_kind(rec), frozenset())
    probed = list(_probe_hits(calls, src, undeclared))
    draft = src.draft.get(record_key(rec))
    if draft is not None and draft.outcome in FAILING:
        hits += _execution_hits(rec, draft, calls, src, probed)
    hits += probed
    seen: set[GapId] = set()
    return [h for h in hits if not (h.gap in seen or seen.add(h.gap))]


def _unattributed_why(rec: TestRecord, src: RunSources, dec: Decision | None) -> str:
    draft = src.draft.get(record_key(rec))
    if dec is not None and _NOT_THE_BACKEND in dec.reason:
        return f"it fails on CPU too, the reference device: {_first_line(dec.reason)}"
    if record_kind(rec) in src.cpu_failed:
        return "it failed on CPU too, the reference device, in the capture: not the backend's gap"
    if draft is not None and draft.outcome in FAILING:
        return f"{draft.outcome} in the draft with {draft.failure_class or 'no class'}: " \
               f"{_first_line(draft.evidence or draft.failure_text)[:300]}"
    if rec.outcome == "skipped":
        return _CONFIG_SKIP.sub("", _first_line(rec.failure_text).removeprefix("Skipped: ")).strip()
    return _first_line(dec.reason if dec is not None else rec.failure_text)[:300]


def attribute(src: RunSources) -> list[Held]:
    """Every held-back instance of the run, with its gaps or why it has none."""
    out = []
    for rec in src.final:
        if not rec.generic and rec.outcome == "skipped":  # a file skipped whole: it does not import
            out.append(Held(key=rec.nodeid, test=TestKey.parse(rec.nodeid), dtype=None, op=None, module=None,
                            outcome=rec.outcome, skip_text="", device=False,
                            why=f"the whole file: {_first_line(rec.failure_text).removeprefix('Skipped: ')}"))
            continue
        if not _held(rec, src.verified):
            continue
        test = TestKey.of(TestKey.parse(rec.nodeid).file, rec.generic or "")
        dec = src.decisions.get(test)
        base = dict(key=record_key(rec), test=test, dtype=rec.dtype, op=rec.op, op_variant=rec.op_variant,
                    module=rec.module, outcome=rec.outcome, skip_text=_first_line(rec.failure_text) if rec.outcome == "skipped" else "")
        not_device = _not_device(rec, dec, src.device, src.executed)
        if not_device is not None:
            out.append(Held(**base, device=False, why=not_device))
            continue
        cpu_too = record_kind(rec) in src.cpu_failed or (dec is not None and _NOT_THE_BACKEND in dec.reason)
        hits = () if cpu_too else tuple(_hits(rec, src))
        out.append(Held(**base, device=True, hits=hits, why="" if hits else _unattributed_why(rec, src, dec)))
    return out
