"""The offline brain's stage 4, refine: what execution records say about a test's
previous decision, tabled in agents/offline/brain.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from testcurator.agents.brain import BackendContext, ExecutionRecord, RefineRequest
from testcurator.agents.decision import Decision
from testcurator.agents.offline.bucket import decide_bucket
from testcurator.agents.offline.probe import probe_exclusion_note, without_probe_exclusions
from testcurator.agents.offline.rules import CPU_FAILED, MODE_WORD, Wish, decision, excluded_words, names, quote
from testcurator.config.apply import OWN_SKIP
from testcurator.config.params import param_ref, spelling
from testcurator.names import counted, every
from testcurator.vocab import (
    FAILED_EVIDENCE, HARD_FAILURE_CLASSES, HARD_OUTCOMES, NOT_EVIDENCE_CLASSES, PASSED_EVIDENCE, Mode, op_at, op_matches)

MAX_EVIDENCE = 8


@dataclass(frozen=True)
class Variant:
    rec: ExecutionRecord
    status: str  # passed | failed | flaky (last attempt passed) | intermittent | skipped | infra

    @property
    def hard(self) -> bool:
        return self.rec.failure_class in HARD_FAILURE_CLASSES or any(o in HARD_OUTCOMES for o in self.rec.outcomes)

    def cls(self) -> str:
        return self.rec.failure_class or "unknown"

    def line(self) -> str:
        head = f"{self.rec.variant}: {'/'.join(self.rec.outcomes)}"
        return head if self.status in ("passed", "skipped") else f"{head} [{self.cls()}] {quote(self.rec.message, 120)}"

    @property
    def expected(self) -> bool:
        return self.status == "failed" and self.rec.expected_failure

    def verb(self) -> str:
        if self.expected:
            return "xfailed on every attempt (upstream expects it to fail)"
        if not self.hard:
            return "failed on every attempt"
        return "timed out" if self.cls() == "timeout" or "timeout" in self.rec.outcomes else "crashed"

    def why(self) -> str:
        # "failed with unknown (...)" reads as a word missing: name the class only when known.
        cls = "an unclassified failure" if self.cls() == "unknown" else self.cls()
        return f"{cls} ({quote(self.rec.message) if self.rec.message else 'no message'})"


def _variant(rec: ExecutionRecord) -> Variant:
    outs = [o for o in rec.outcomes if o in FAILED_EVIDENCE or o in PASSED_EVIDENCE]  # skipped and unknown outcomes say nothing
    if not outs:
        return Variant(rec, "skipped")
    if all(o in PASSED_EVIDENCE for o in outs):
        return Variant(rec, "passed")
    if rec.failure_class in NOT_EVIDENCE_CLASSES and outs[-1] in FAILED_EVIDENCE:
        return Variant(rec, "infra")
    if all(o in FAILED_EVIDENCE for o in outs):
        return Variant(rec, "failed")
    return Variant(rec, "flaky" if outs[-1] in PASSED_EVIDENCE else "intermittent")


def _attribute(failing: list[Variant], usable: list[Variant]) -> tuple[set[str], set[str], set[str], list[Variant]]:
    """(dtypes, ops, modules) that every variant having them failed, and the failures they
    leave unexplained. The failure class picks the dimension tried first; an OpInfo op at one
    dtype (``op_at``) is tried last, as upstream's own per-op, per-dtype skips are: on OpenReg's
    corpus, 4 of test_fn_gradgrad's 649 variants failed (linalg.tensorsolve in complex128, a
    singular matrix; the op passes in float64, complex128 in other ops) and the whole test
    became an xfail whose 645 passes guarded nothing, and ran again in the verification.
    An OpInfo's variant (``div_floor_rounding``: div's other variants pass) is tried after its
    op, whole and at one dtype: 6 gradient and jit tests there stayed xfails for want of it."""
    found: dict[str, set[str]] = {dim: set() for dim in _DIMENSIONS}
    left = []
    for v in failing:
        order = ("op", "variant", *_DIMENSIONS[2:]) if v.rec.failure_class == "unsupported_op" else _DIMENSIONS
        hit = next(((dim, value) for dim in order for value in _values(v.rec, dim)
                    if all(u.status == "failed" for u in usable if value in _values(u.rec, dim))), None)
        if hit is None:
            left.append(v)
        else:
            found[hit[0]].add(hit[1])
    ops = found["op"] | found["variant"] | found["op_dtype"] | found["variant_dtype"]
    return found["dtype"], ops, found["module"], left


#: Refine's dimensions, in the order tried (an ``unsupported_op`` tries the op first).
_DIMENSIONS = ("dtype", "op", "variant", "module", "op_dtype", "variant_dtype")


def _param_split(left: list[Variant], usable: list[Variant]) -> dict[tuple[str, str], str]:
    """The one @parametrize value that every failure ``left`` unexplained has and no variant
    that did not fail has: {(argument, repr): ``name=value`` as the config spells it}, or {}.

    Tried after dtype, op and module, so a dtype that explains the failures still wins."""
    if not left:
        return {}
    shared = set(left[0].rec.params).intersection(*(v.rec.params for v in left[1:]))
    for name, text in sorted(shared):
        if all(u.status == "failed" for u in usable if (name, text) in u.rec.params):
            spelt = spelling(text, {t for u in usable for n, t in u.rec.params if n == name})
            if spelt is not None:  # else no config value names it alone: excluding it would hit others
                return {(name, text): param_ref(name, spelt)}
    return {}


def _crashing_ops(left: list[Variant], usable: list[Variant], excluded: set[str]) -> set[str]:
    """The OpInfo ops of the crashes and hangs ``left`` unexplained, to exclude (an @ops test
    keeps its other ops' variants, where skipping it would lose them all): at the dtypes it
    crashed in where the op passes in another (upstream masked.std kills OpenReg's process in
    complex64 only), else whole. None when a crash has no op, or when no passing variant would
    be left."""
    hard = [v for v in left if v.hard]
    if not hard or any(not v.rec.op for v in hard):
        return set()
    crashing: set[str] = set()
    for op in {v.rec.op_name for v in hard if v.rec.op_name}:
        at = {op_at(op, d) for v in hard if v.rec.op_name == op for d in v.rec.dtypes}
        passes = any(u.status == "passed" and u.rec.op_name == op and not u.rec.op_excluded(at) for u in usable)
        crashing |= at if at and passes else {op}
    gone = excluded | crashing
    left_passing = any(u.status == "passed" and not u.rec.op_excluded(gone) for u in usable)
    return crashing if left_passing else set()


def _values(rec: ExecutionRecord, dim: str) -> tuple[str, ...]:
    """The variant's values along ``dim``: each member of a dtype pair is a dtype of its own."""
    if dim == "dtype":
        return rec.dtypes
    if dim == "op_dtype":
        return tuple(op_at(rec.op, d) for d in rec.dtypes) if rec.op else ()
    if dim in ("variant", "variant_dtype"):
        name = rec.op_name if rec.op_variant else None
        return () if name is None else (name,) if dim == "variant" else tuple(op_at(name, d) for d in rec.dtypes)
    value = getattr(rec, dim)
    return (value,) if value else ()


@dataclass(frozen=True)
class Outcome:
    """What execution showed, shared by the refine rules."""

    prev: Decision
    usable: list[Variant]
    infra: list[Variant]
    dtypes: set[str]
    ops: set[str]
    modules: set[str]
    unexplained: list[Variant]
    remaining: list[Variant]
    params: dict[tuple[str, str], str] = field(default_factory=dict)  # (argument, repr) -> name=value
    expected: list[Variant] = field(default_factory=list)  # upstream's expected failures beside passes, kept

    def exclusion_clause(self, *, cpu_note: bool = True) -> str:
        if not (self.dtypes or self.ops or self.modules or self.params):
            return ""
        culprit = next(v for v in self.usable if v.status == "failed" and self.explains(v))
        what = excluded_words(self.dtypes, self.ops, self.modules, self.param_clause())
        # The capture's CPU failures stay in view: excluded dtypes that fail on CPU as well are
        # not the backend's gap (upstream test_scatter_reduce_sum in float16).
        cpu = _cpu_finding(self.prev) if cpu_note else None
        on_cpu = f"; on CPU, the reference device, {cpu} too" if cpu else ""
        return f", with {what} excluded ({culprit.rec.variant} {culprit.verb()} with {culprit.why()}{on_cpu})"

    def param_clause(self) -> str:
        if not self.params:
            return ""
        failed = [v for v in self.usable if any(p in self.params for p in v.rec.params)]
        return (f"parameter {', '.join(sorted(self.params.values()))} (the {counted(len(failed), 'variant')} that have it "
                f"all fail, the other {len(self.usable) - len(failed)} do not)")

    def explains(self, v: Variant) -> bool:
        return (v.rec.excluded_by(self.dtypes) or v.rec.op_excluded(self.ops)
                or v.rec.module in self.modules
                or any(p in self.params for p in v.rec.params))

    def evidence(self) -> tuple[str, ...]:
        shown = sorted(self.usable + self.infra + self.expected, key=lambda v: (v.status == "passed", v.rec.variant))
        lines = [v.line() for v in shown[:MAX_EVIDENCE]]
        if len(shown) > MAX_EVIDENCE:
            lines.append(f"... {len(shown) - MAX_EVIDENCE} more variants")
        return tuple(lines)

    def make(self, mode: Mode, reason: str, *, needs_review: bool = False, missing: Sequence[str] = ()) -> Decision:
        if self.infra:
            reason = f"{reason[:-1]}; {counted(len(self.infra), 'variant')} lost to infrastructure errors."
            needs_review, missing = True, (*missing, "a rerun free of infrastructure errors")
        if self.expected and mode != "skip":
            reason = (f"{reason[:-1]}; {counted(len(self.expected), 'other variant')} xfailed on every attempt: upstream "
                      "expects {} to fail, and an xfail leaves the test green.".format(
                          "it" if len(self.expected) == 1 else "them"))
        if mode != "skip":
            reason += probe_exclusion_note(self.prev)
        # A skip runs nothing, so it carries no edits.
        dtypes = [*self.prev.exclude_dtypes, *self.dtypes] if mode != "skip" else []
        ops = [*self.prev.exclude_ops, *self.ops] if mode != "skip" else []
        modules = [*self.prev.exclude_modules, *self.modules] if mode != "skip" else []
        params = [*self.prev.exclude_params, *self.params.values()] if mode != "skip" else []
        return decision(self.prev.test, mode, reason, self.evidence(), needs_review=needs_review, missing=missing,
                        exclude_dtypes=dtypes, exclude_ops=ops, exclude_modules=modules, exclude_params=params)


def _own_skip(message: str) -> str | None:
    """``dtype float64 excluded by edits`` -> what excluded it and whence; None: not the config's."""
    match = OWN_SKIP.match(message.removeprefix("Skipped: "))
    if match is None:
        return None
    whence = "the draft's own edit of this test" if match["how"] == "excluded by edits" else (
        "the profile's declared capabilities")
    return f"`{match['what']}` ({whence})"


def _cpu_finding(prev: Decision) -> str | None:
    """What the capture saw fail on CPU (``1 of 4 instances failed``), from the draft's evidence."""
    return next((e.removeprefix(CPU_FAILED) for e in prev.evidence if e.startswith(CPU_FAILED)), None)


def _on_cpu_too(prev: Decision) -> str:
    """The capture's finding that the test fails on CPU as well, kept beside the device's."""
    cpu = _cpu_finding(prev)
    return f", as on CPU, the reference device ({cpu}): the failure is not the backend's" if cpu else ""


def _failure_rules(o: Outcome) -> Decision | None:
    if not o.unexplained:
        return None
    hard = [v for v in o.unexplained if v.hard]
    if hard:  # rule crash
        return o.make("skip", f"Skip: {hard[0].rec.variant} {hard[0].verb()} ({quote(hard[0].rec.message)}), and a "
                      "crash or hang takes down the worker running the shard.")
    first = o.unexplained[0]
    if all(v.status == "failed" for v in o.remaining):  # rule consistent_failure
        o = replace(o, prev=without_probe_exclusions(o.prev))  # the whole test fails: the probe's split is moot
        if _cpu_finding(o.prev):
            # Upstream's own failure: it passes or fails with the order and the environment the
            # tests run in (upstream test_utils_config_module's test_env_name_semantics failed in
            # the draft and on CPU, passed in the verification: strict, the night went red), and
            # its passing says nothing about the backend.
            return o.make("xfail", f"Xfail: every variant {first.verb()} with {first.why()}"
                          f"{_on_cpu_too(o.prev)}; not strict: a pass of an upstream failure says nothing "
                          f"of the backend{o.exclusion_clause(cpu_note=False)}.")
        return o.make("xfail_strict", f"Xfail strict: every variant {first.verb()} with {first.why()}"
                      ", so an unexpected pass will signal promotion"
                      f"{o.exclusion_clause(cpu_note=False)}.")
    passing = [v for v in o.remaining if v.status != "failed"]  # rule partial_failure
    return o.make("xfail", f"Xfail: {counted(len(o.unexplained), 'variant')} fail beside {counted(len(passing), 'passing one', 'passing ones')} and no "
                  f"dtype, op, module or parameter value separates them ({first.rec.variant}: {first.why()}).",
                  needs_review=True, missing=("which variants fail, as a dtype, op, module or parameter split",))


def _pass_rules(o: Outcome) -> Decision:
    mode, n = o.prev.mode, len(o.remaining)
    shaky = [v for v in o.remaining if v.status == "intermittent"]
    if shaky:  # rule intermittent
        v = shaky[0]
        return o.make("xfail", f"Xfail: {v.rec.variant} failed on its last attempt after passing "
                      f"({'/'.join(v.rec.outcomes)}, {v.why()}), so the result is not deterministic"
                      f"{o.exclusion_clause()}.",
                      needs_review=True, missing=("stable results over more runs",))
    flaky = [v for v in o.remaining if v.status == "flaky"]
    if flaky:
        v = flaky[0]
        return o.make(mode if mode != "xfail_strict" else "mandatory_success",
                      f"{MODE_WORD[mode if mode != 'xfail_strict' else 'mandatory_success']} kept though flaky: "
                      f"{v.rec.variant} passed only on retry ({'/'.join(v.rec.outcomes)}, {v.why()})"
                      f"{o.exclusion_clause()}.", needs_review=True, missing=("stable results over more runs",))
    if mode == "xfail_strict":
        return o.make("mandatory_success", f"Mandatory success (promoted from xfail_strict): {every(n, 'variant')} passed "
                      f"on every attempt{o.exclusion_clause()}.")
    if mode == "xfail" and not o.prev.by_human:  # a brain's guess, now disproved by execution
        return o.make("mandatory_success", f"Mandatory success (promoted from xfail): {every(n, 'variant')} passed on "
                      f"every attempt{o.exclusion_clause()}.")
    if mode == "xfail":  # a person's decision: execution only proposes
        return o.make("xfail", f"Xfail kept: {every(n, 'variant')} passed on every attempt, so promotion is proposed"
                      f"{o.exclusion_clause()}.", needs_review=True,
                      missing=("promotion proposed: passes consistently",))
    return o.make("mandatory_success", f"Mandatory success confirmed on the device: {every(n, 'variant')} passed on every "
                  f"attempt{o.exclusion_clause()}.")


def _blockers(record: Decision, req: RefineRequest, backend: BackendContext) -> list[str]:
    """Why ``record`` may not be mandatory_success on this backend (the capability rails)."""
    if record.mode != "mandatory_success":
        return []
    base = req.request
    blockers = sorted({op for op in base.aten_ops if backend.op_unsupported(op)})
    ops = [op for op in base.ops if not any(op_matches(op, x) for x in record.exclude_ops)]
    if base.ops and all(backend.op_unsupported(op) for op in ops):
        blockers.append(f"only unsupported ops ({names(base.ops)})")
    dtypes = [x for x in base.dtypes if x not in record.exclude_dtypes]
    if base.dtypes and all(backend.dtype_unsupported(x) for x in dtypes):
        blockers.append(f"only unsupported dtypes ({', '.join(base.dtypes)})")
    return blockers


def _capability_guard(record: Decision, req: RefineRequest, backend: BackendContext) -> Decision:
    """A mandatory result must also pass the capability rails: execution and the declared
    gaps disagree when it does not, which a reviewer must settle."""
    blockers = _blockers(record, req, backend)
    if not blockers:
        return record
    return replace(record, mode="xfail", needs_review=True,
                   missing=(*record.missing, "check the backend's declared gaps"),
                   reason=f"Xfail: execution passed, but the backend declares {names(blockers)} unsupported, so the "
                   "declaration or the op map is stale.")


def decide_refine(req: RefineRequest, backend: BackendContext, wishes: Sequence[Wish]) -> Decision:
    prev = req.previous
    if prev is None or _blockers(prev, req, backend):  # none, or made before a gap became known: re-bucket
        prev = decide_bucket(req.request, backend, wishes)
    if not req.executions:  # rule no_records
        return prev
    variants = [_variant(r) for r in req.executions]
    usable = [v for v in variants if v.status not in ("skipped", "infra")]
    infra = [v for v in variants if v.status == "infra"]
    if not usable:
        if infra:  # rule infrastructure
            return decision(prev.test, prev.mode, f"{MODE_WORD[prev.mode]} kept: {infra[0].rec.variant} hit an "
                            f"infrastructure error ({quote(infra[0].rec.message)}), which says nothing about the test.",
                            (v.line() for v in infra[:MAX_EVIDENCE]), needs_review=True,
                            missing=("a rerun free of infrastructure errors",), exclude_dtypes=prev.exclude_dtypes,
                            exclude_ops=prev.exclude_ops, exclude_modules=prev.exclude_modules,
                            exclude_params=prev.exclude_params)
        if prev.mode == "skip":
            return prev
        skipped = variants[0].rec  # rule skipped
        lines = (f"{v.rec.variant}: {'/'.join(v.rec.outcomes)}" for v in variants[:MAX_EVIDENCE])
        own = [_own_skip(v.rec.message) for v in variants]
        if all(own):  # the draft config's exclusions or the profile's capabilities, not the test
            return decision(prev.test, "skip", f"Skip: every variant was skipped by the draft config itself, never run "
                            f"on the device: {'; '.join(dict.fromkeys(w for w in own if w))}.", lines)
        return decision(prev.test, "skip", f"Skip: every variant was skipped on the device by the test itself "
                        f"({quote(skipped.message) if skipped.message else 'no reason given'}).", lines)
    # Upstream's expected failures beside variants that pass are kept, not excluded: they stay
    # green under mandatory_success (upstream test_testing's subtest expectedFailure values).
    expected = [v for v in usable if v.expected] if prev.mode != "skip" else []
    expected = expected if any(v.status in ("passed", "flaky") for v in usable if not v.expected) else []
    usable = [v for v in usable if v not in expected]
    failing = [v for v in usable if v.status == "failed"]
    dtypes, ops, modules, unexplained = _attribute(failing, usable)
    ops |= _crashing_ops(unexplained, usable, ops)
    unexplained = [v for v in unexplained if not v.rec.op_excluded(ops)]
    params = _param_split(unexplained, usable)
    unexplained = [] if params else unexplained
    remaining = [v for v in usable if not v.rec.excluded_by(dtypes) and not v.rec.op_excluded(ops)
                 and v.rec.module not in modules and not any(p in params for p in v.rec.params)]
    if failing and not remaining:  # the whole test fails: no exclusion, the mode says so
        dtypes, ops, modules, params, unexplained, remaining = set(), set(), set(), {}, failing, usable
    o = Outcome(prev, usable, infra, dtypes, ops, modules, unexplained, remaining, params, expected)
    if prev.mode == "skip":  # rule previous skip: execution only proposes
        if failing or any(v.status != "passed" for v in usable):
            return prev
        return decision(prev.test, "skip", f"Skip kept: {every(len(usable), 'variant')} passed on the device, so "
                        f"promotion is proposed against the earlier reason: {prev.reason}", o.evidence(),
                        needs_review=True,
                        missing=("promotion proposed: passes on the device",))
    record = _failure_rules(o) or _pass_rules(o)
    return _capability_guard(record, req, backend)
