"""The offline brain: the default, deterministic brain (no network) that decides from
evidence and small, named, ordered rules. Same inputs, same records, always.

Every record has ``brain="offline"`` and ``prompt_hash`` = a hash of
:data:`~testcurator.agents.offline_rules.RULES_VERSION` (bumped whenever a rule's outcome
changes, so caches and reports tell rule sets apart). Reasons are one sentence naming the
evidence; ``evidence`` lists the facts quoted. Preferences are read with the small grammar
of agents/offline_rules.py ("skip/no/ignore/... X", "focus on/include/... X", "only X").

Stage 1, scope (one FileDecision per path; first rule that decides wins):

====================  =====================================================================
preference_exclude    a preference excludes the path, its area or its area's hook(s) -> drop
                      (first: the team's explicit wish beats everything)
other_device          an area tied to another device (test_cuda*, mps, xpu, mkldnn) -> drop
preference_include    a preference asks for it (include/focus/only) -> keep, even without the
                      hook (after other_device: a CUDA-only file cannot run here anyway)
preference_only       "only X" and the path is a known area outside X -> drop
tooling               tests tooling (public bindings, typing, cpp extensions...) -> drop
empty                 n_tests == 0 and no sample tests -> drop
hooks                 known area: keep iff every area on the path has one hook the backend
                      implements (declared + included - excluded); no hooks declared -> keep,
                      needs_review
device_generic        unknown area, summary shows instantiate_device_type_tests -> keep (drop
                      if eager_ops is not implemented)
unknown               keep, needs_review (dropping is the costly mistake)
====================  =====================================================================

Stage 3, bucket (first rule that decides wins; ``ops``/``dtypes`` only add edits):

====================  =====================================================================
other_device          @onlyCUDA/@onlyCPU/@onlyOn(...)/@onlyNativeDeviceTypes..., @skipMeta,
                      @skipPRIVATEUSE1, skipIf(not TEST_CUDA), a test_cuda* file -> skip
upstream_skip         @unittest.skip -> skip; @unittest.expectedFailure -> xfail
needs                 needs a hook the backend lacks (autograd, compile, inductor, distributed,
                      sparse, quantized, nested, jit, export, onnx, amp, complex), or an area a
                      preference excludes (double backward, multi-device) -> skip
known_missing_op      a captured ATen op is known unsupported -> skip naming it. Not
                      xfail_strict: the op cannot pass, and a run only costs CI time; the
                      op map re-admits the test when the op leaves unsupported_ops
ops                   every @ops op unsupported -> skip; known-gap ops -> exclude_ops
dtypes                no dtype left -> skip; known-gap dtypes, complex/quantized dtypes
                      without their hook, dtypes a preference excludes -> exclude_dtypes
similar               no ops and no captured ATen ops: follow a strict majority of close
                      neighbours (score = similarity, 1 is identical; >= 0.75, best 5, a
                      lone neighbour needs >= 0.9; xfail_strict read as xfail), needs_review
default               mandatory_success; without captured ops and without a fallback,
                      needs_review ("to be confirmed by execution")
====================  =====================================================================

Hooks are the declared ones, plus those a preference includes, minus those it excludes; a
profile without hooks infers nothing from them (scope keeps known areas for review).
Ops and dtypes outside a *declared* ``supported_ops``/``supported_dtypes`` list are not
excluded per test: the config's ``global`` capability list filters them at run time, so
enabling an op or dtype there admits every test waiting on it. Only known gaps
(``unsupported_ops``/``unsupported_dtypes``, hooks, preferences) become edits.

Stage 4, refine (per test, from its variants' records; outcomes ``crashed``/``xfailed``
count as failures, ``xpassed`` as a pass; ``infrastructure``/``transient`` records and
all-skipped variants are not evidence):

====================  =====================================================================
(re-bucket)           no previous decision, or one the capability rails now reject (a gap
                      learnt since): the bucket rules decide the previous decision first
no_records            keep the previous decision unchanged
infrastructure        only infrastructure failures -> previous mode, needs_review
skipped               every variant skipped by the test itself -> skip (unless already skip)
previous_skip         a skip stays skip; if every variant passed: needs_review, "promotion
                      proposed: passes on the device"
exclusions            variants failing on every attempt whose dtype (or op) fails in every
                      variant that has it -> exclude_dtypes/exclude_ops (the class picks the
                      dimension first: unsupported_op -> op, others -> dtype; none when
                      nothing would be left to run); then:
crash                 an unexcludable crash or timeout -> skip (it takes down the worker)
consistent_failure    every remaining variant fails -> xfail_strict (class + evidence line)
partial_failure       unexcludable failures beside passes -> xfail, needs_review
intermittent          a variant fails on its last attempt after passing -> xfail, review
passed                xfail_strict -> mandatory_success (promotion); xfail -> kept,
                      needs_review, "promotion proposed: passes consistently";
                      mandatory_success -> kept (flaky = passes on retry: kept, review)
capability_guard      a mandatory result that calls a known-unsupported op -> xfail, review
====================  =====================================================================
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from testcurator.agents.brain import (
    BackendContext, BrainContext, BrainSettings, BucketRequest, ExecutionRecord, RefineRequest, ScopeRequest, Usage,
    op_matches,
)
from testcurator.agents.decision import Decision, FileDecision
from testcurator.agents.offline_rules import (
    COMPLEX_DTYPES, QUANTIZED_DTYPES, Wish, decide_scope, decision, effective_hooks, names, needed_features,
    parse_preferences, path_facts, quote, wishes_for,
)
from testcurator.config.profile import HOOKS
from testcurator.config.schema import MODES, Mode


# --- stage 3: bucket ----------------------------------------------------------------------

_TORCH_DEVICES = frozenset({"cpu", "cuda", "xpu", "mps", "hpu", "mtia", "meta", "xla", "lazy", "ipu", "ve", "vulkan",
                            "metal", "maia", "fpga"})
_NATIVE = frozenset({"cpu", "cuda", "xpu", "meta", "mps", "mtia"})  # + privateuse1 (common_utils.NATIVE_DEVICES)
PU1 = "privateuse1"
_ONLY: dict[str, frozenset[str]] = {
    "onlyCPU": frozenset({"cpu"}), "onlyCUDA": frozenset({"cuda"}), "onlyMPS": frozenset({"mps"}),
    "onlyXPU": frozenset({"xpu"}), "onlyHPU": frozenset({"hpu"}), "onlyPRIVATEUSE1": frozenset({PU1}),
    "onlyCUDAAndPRIVATEUSE1": frozenset({"cuda", PU1}), "onlyNativeDeviceTypes": _NATIVE | {PU1},
    "onlyAccelerator": (_TORCH_DEVICES - {"cpu", "meta"}) | {PU1}, "requires_cuda": frozenset({"cuda"}),
    "requires_gpu": frozenset({"cuda", "xpu", "mps"}),
}
_SKIP_ON = {"skipMeta": "meta", "skipXLA": "xla", "skipMPS": "mps", "skipHPU": "hpu", "skipXPU": "xpu",
            "skipLazy": "lazy", "skipPRIVATEUSE1": PU1}
_NEEDS_DEVICE = re.compile(r"(TEST_CUDA|TEST_MULTIGPU|TEST_CUDNN|torch\.cuda\.is_available\(\)|TEST_MPS|TEST_XPU)")
_DECO = re.compile(r"^@?\s*(?P<name>[\w.]+)\s*(?:\((?P<args>.*)\))?\s*$", re.S)
MIN_SIMILARITY, MAX_NEIGHBOURS = 0.75, 5


@dataclass(frozen=True)
class Deco:
    short: str
    args: str
    text: str


@dataclass
class Draft:
    """Edits the ops/dtypes rules add before a later rule decides the mode."""

    exclude_dtypes: list[str] = field(default_factory=list)
    exclude_ops: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)

    def clause(self) -> str:
        return f", with {'; '.join(self.notes)}" if self.notes else ""


@dataclass(frozen=True)
class Facts:
    decos: tuple[Deco, ...]
    hooks: frozenset[str] | None
    wishes: tuple[Wish, ...]
    needs: dict[str, str]


def _decos(texts: Sequence[str]) -> tuple[Deco, ...]:
    out = []
    for text in texts:
        m = _DECO.match(text.strip())
        if m:
            out.append(Deco(m.group("name").rsplit(".", 1)[-1], m.group("args") or "", text.strip()))
    return tuple(out)


def _device_kind(device: str) -> str:
    return device if device in _TORCH_DEVICES else PU1


def _allowed(deco: Deco) -> frozenset[str] | None:
    quoted = frozenset(re.findall(r"[\'\"](\w+)[\'\"]", deco.args))
    if deco.short == "onlyOn":
        return quoted
    if deco.short == "onlyNativeDeviceTypesAnd":
        return _NATIVE | {PU1} | quoted
    if deco.short in ("skipIf", "skipUnless") and (m := _NEEDS_DEVICE.search(deco.args)):
        negated = deco.args.lstrip().startswith("not ")
        if negated == (deco.short == "skipIf"):
            return frozenset({"mps"} if "MPS" in m.group(1) else {"xpu"} if "XPU" in m.group(1) else {"cuda"})
    return _ONLY.get(deco.short)


def bucket_other_device(req: BucketRequest, f: Facts, backend: BackendContext, d: Draft) -> Decision | None:
    kind = _device_kind(backend.device)
    for deco in f.decos:
        allowed = _allowed(deco)
        if allowed is not None and kind not in allowed and backend.device not in allowed:
            return decision(req.test, "skip", f"Skip: {deco.text} restricts it to {names(sorted(allowed))}, and the "
                            f"backend's device is {backend.device!r}.", (f"decorator: {deco.text}",
                                                                         f"device: {backend.device}"))
        if _SKIP_ON.get(deco.short) in (kind, backend.device):
            return decision(req.test, "skip", f"Skip: {deco.text} skips it on the backend's device "
                            f"{backend.device!r} ({kind}).", (f"decorator: {deco.text}",))
    for part, area in path_facts(req.file, "file", None).areas:
        if area.devices and backend.device not in area.devices:
            return decision(req.test, "skip", f"Skip: it lives in {req.file}, a {'/'.join(area.devices).upper()}-only "
                            f"file, and the backend's device is {backend.device!r}.", (f"file: {req.file}",))
    return None


def bucket_upstream_skip(req: BucketRequest, f: Facts, backend: BackendContext, d: Draft) -> Decision | None:
    for deco in f.decos:
        if deco.short == "skip" and deco.text.lstrip("@").startswith("unittest."):
            return decision(req.test, "skip", f"Skip: upstream skips it on every device ({deco.text}).",
                            (f"decorator: {deco.text}",))
        if deco.short == "expectedFailure" and (not deco.args or backend.device in deco.args):
            return decision(req.test, "xfail", f"Xfail: upstream expects it to fail ({deco.text}).",
                            (f"decorator: {deco.text}",))
    return None


def bucket_needs(req: BucketRequest, f: Facts, backend: BackendContext, d: Draft) -> Decision | None:
    excluded = {**wishes_for(f.wishes, "exclude", "hook"), **wishes_for(f.wishes, "exclude", "area")}
    for need, shown in f.needs.items():
        if need in excluded:
            wish = excluded[need]
            return decision(req.test, "skip", f"Skip: it needs {need} ({shown}), which the {wish.quote()} excludes.",
                            (shown, wish.quote()))
        if f.hooks is not None and need in HOOKS and need not in f.hooks:
            return decision(req.test, "skip", f"Skip: it needs the {need} hook ({shown}), which the backend does "
                            f"not implement.", (shown, f"backend hooks: {', '.join(sorted(f.hooks)) or 'none'}"))
    return None


def bucket_known_missing_op(req: BucketRequest, f: Facts, backend: BackendContext, d: Draft) -> Decision | None:
    missing = sorted({op for op in req.aten_ops if backend.op_unsupported(op)})
    if not missing:
        return None
    return decision(req.test, "skip", f"Skip: it calls {names(missing)}, known unsupported on {backend.name}, so it "
                    f"cannot pass until the op is enabled.", (f"captured op: {op}" for op in missing))


def bucket_ops(req: BucketRequest, f: Facts, backend: BackendContext, d: Draft) -> Decision | None:
    bad = [op for op in req.ops if backend.op_unsupported(op)]
    if not bad:
        return None
    if len(bad) == len(req.ops):
        return decision(req.test, "skip", f"Skip: every op it is parametrized over is unsupported on {backend.name} "
                        f"({names(bad)}).", (f"@ops: {names(req.ops)}", f"unsupported: {names(bad)}"))
    gaps = [op for op in bad if any(op_matches(op, e) for e in backend.unsupported_ops)]
    d.exclude_ops += gaps
    if gaps:
        d.notes.append(f"ops {names(gaps)} excluded as known unsupported")
    if len(bad) > len(gaps):
        d.notes.append(f"{len(bad) - len(gaps)} undeclared op(s) left to the global supported_ops filter")
    d.evidence.append(f"@ops: {len(req.ops) - len(bad)} of {len(req.ops)} supported")
    return None


def _bad_dtypes(req: BucketRequest, f: Facts, backend: BackendContext) -> dict[str, str]:
    prefs = wishes_for(f.wishes, "exclude", "dtype")
    bad: dict[str, str] = {}
    for dtype in req.dtypes:
        if dtype in prefs:
            bad[dtype] = prefs[dtype].quote()
        elif dtype in backend.unsupported_dtypes:
            bad[dtype] = "known unsupported"
        elif f.hooks is not None and dtype in COMPLEX_DTYPES and "complex" not in f.hooks:
            bad[dtype] = "no complex hook"
        elif f.hooks is not None and dtype in QUANTIZED_DTYPES and "quantized" not in f.hooks:
            bad[dtype] = "no quantized hook"
        elif backend.dtype_unsupported(dtype):
            bad[dtype] = "undeclared"
    return bad


def bucket_dtypes(req: BucketRequest, f: Facts, backend: BackendContext, d: Draft) -> Decision | None:
    bad = _bad_dtypes(req, f, backend)
    if not bad:
        return None
    if len(bad) == len(req.dtypes):
        return decision(req.test, "skip", f"Skip: none of its dtypes is usable on {backend.name} "
                        f"({', '.join(f'{k}: {v}' for k, v in bad.items())}).", (f"dtypes: {', '.join(req.dtypes)}",))
    edits = {k: v for k, v in bad.items() if v != "undeclared"}  # undeclared: the global filter (see docstring)
    d.exclude_dtypes += edits
    for why in dict.fromkeys(edits.values()):
        d.notes.append(f"dtypes {', '.join(k for k, v in edits.items() if v == why)} excluded ({why})")
    d.evidence.append(f"dtypes: {', '.join(req.dtypes)}")
    return None


def bucket_similar(req: BucketRequest, f: Facts, backend: BackendContext, d: Draft) -> Decision | None:
    if req.ops or req.aten_ops:
        return None  # direct evidence decides; neighbours are a tie-breaker only
    close = sorted((s for s in req.similar if s.score >= MIN_SIMILARITY),
                   key=lambda s: (-s.score, s.test))[:MAX_NEIGHBOURS]
    close = [s for s in close if s.mode in MODES]
    modes = ["xfail" if s.mode == "xfail_strict" else s.mode for s in close]
    top = max(sorted(set(modes)), key=modes.count) if modes else None
    if top is None or modes.count(top) * 2 <= len(modes) or (len(close) == 1 and close[0].score < 0.9):
        return None
    cited = [s for s, m in zip(close, modes) if m == top]
    return decision(req.test, top, f"{_MODE_WORD[top]}: no ops are known for it, and {len(cited)} of {len(close)} "
                    f"close neighbours are {top} ({names(f'{s.test} {s.score:.2f}' for s in cited)}; nearest says "
                    f"{quote(cited[0].reason, 100)}){d.clause()}.",
                    (*(f"similar: {s.test} ({s.score:.2f}) {s.mode}" for s in close), *d.evidence), needs_review=True,
                    missing=("ATen ops the test calls (op map)", "result on device"),
                    exclude_dtypes=d.exclude_dtypes if top != "skip" else (),
                    exclude_ops=d.exclude_ops if top != "skip" else ())


def bucket_default(req: BucketRequest, f: Facts, backend: BackendContext, d: Draft) -> Decision:
    evidence = list(d.evidence)
    review, missing = False, ()
    if req.aten_ops:
        basis = (f"none of the {len(req.aten_ops)} ATen ops it called on CPU ({names(req.aten_ops, 4)}) is known "
                 "unsupported")
        unregistered = [op for op in req.aten_ops if backend.registered_ops and not backend.has_fallback and
                        not any(op_matches(op, r) for r in backend.registered_ops)]
        evidence += [f"captured ops: {len(req.aten_ops)}",
                     *(f"not registered (may decompose): {op}" for op in unregistered[:6])]
    elif req.ops:
        basis = f"{len(req.ops)} OpInfo op(s) ({names(req.ops, 4)}) and no blocker is known for the supported ones"
    elif backend.has_fallback:
        basis = "no known blocker, and the backend's fallback runs ops it does not register"
        evidence.append("backend: has fallback")
    else:
        basis = "no known blocker; to be confirmed by execution (no ATen ops were captured for it)"
        review, missing = True, ("ATen ops the test calls (op map)", "result on device")
    return decision(req.test, "mandatory_success", f"Mandatory success: {basis}{d.clause()}.",
                    evidence or ("no blocker found",),
                    needs_review=review, missing=missing, exclude_dtypes=d.exclude_dtypes, exclude_ops=d.exclude_ops)


_MODE_WORD = {"mandatory_success": "Mandatory success", "xfail": "Xfail", "xfail_strict": "Xfail strict",
              "skip": "Skip"}
BucketRule = Callable[[BucketRequest, Facts, BackendContext, Draft], "Decision | None"]
BUCKET_RULES: tuple[tuple[str, BucketRule], ...] = (
    ("other_device", bucket_other_device), ("upstream_skip", bucket_upstream_skip), ("needs", bucket_needs),
    ("known_missing_op", bucket_known_missing_op), ("ops", bucket_ops), ("dtypes", bucket_dtypes),
    ("similar", bucket_similar), ("default", bucket_default),
)


def decide_bucket(req: BucketRequest, backend: BackendContext, wishes: Sequence[Wish]) -> Decision:
    decos = _decos(req.decorators)
    text = "\n".join((*req.decorators, req.source, req.summary))
    needs = needed_features(req.test, text, req.aten_ops, dtypes_listed=bool(req.dtypes))
    for deco in decos:
        if deco.short == "deviceCountAtLeast" and re.fullmatch(r"\s*([2-9]|\d\d+)\s*", deco.args):
            needs.setdefault("multi_device", f"decorator: {deco.text}")
    facts = Facts(decos, effective_hooks(backend, wishes), tuple(wishes), needs)
    draft = Draft()
    for _, rule in BUCKET_RULES:
        record = rule(req, facts, backend, draft)
        if record is not None:
            return record
    raise AssertionError("bucket_default always decides")  # pragma: no cover


# --- stage 4: refine ----------------------------------------------------------------------

_FAIL = frozenset({"failed", "error", "timeout", "crashed", "xfailed"})
_PASS = frozenset({"passed", "xpassed"})
_NOT_EVIDENCE = frozenset({"infrastructure", "infra", "transient"})
_HARD = frozenset({"crash", "timeout"})
MAX_EVIDENCE = 8


@dataclass(frozen=True)
class Variant:
    rec: ExecutionRecord
    status: str  # passed | failed | flaky (last attempt passed) | intermittent | skipped | infra

    @property
    def hard(self) -> bool:
        return self.rec.failure_class in _HARD or any(o in ("crashed", "timeout") for o in self.rec.outcomes)

    def cls(self) -> str:
        return self.rec.failure_class or "unknown"

    def line(self) -> str:
        head = f"{self.rec.variant}: {'/'.join(self.rec.outcomes)}"
        return head if self.status in ("passed", "skipped") else f"{head} [{self.cls()}] {quote(self.rec.message, 120)}"

    def verb(self) -> str:
        if not self.hard:
            return "failed on every attempt"
        return "timed out" if self.cls() == "timeout" or "timeout" in self.rec.outcomes else "crashed"

    def why(self) -> str:
        return f"{self.cls()} ({quote(self.rec.message) if self.rec.message else 'no message'})"


def _variant(rec: ExecutionRecord) -> Variant:
    outs = [o for o in rec.outcomes if o in _FAIL or o in _PASS]  # skipped and unknown outcomes say nothing
    if not outs:
        return Variant(rec, "skipped")
    if all(o in _PASS for o in outs):
        return Variant(rec, "passed")
    if rec.failure_class in _NOT_EVIDENCE and outs[-1] in _FAIL:
        return Variant(rec, "infra")
    if all(o in _FAIL for o in outs):
        return Variant(rec, "failed")
    return Variant(rec, "flaky" if outs[-1] in _PASS else "intermittent")


def _attribute(failing: list[Variant], usable: list[Variant]) -> tuple[set[str], set[str], list[Variant]]:
    """(dtypes, ops) that every variant having them failed, and the failures they leave
    unexplained. The failure class picks the dimension tried first."""
    dtypes: set[str] = set()
    ops: set[str] = set()
    left = []
    for v in failing:
        order = ("op", "dtype") if v.rec.failure_class == "unsupported_op" else ("dtype", "op")
        for dim in order:
            value = getattr(v.rec, dim)
            if value and all(u.status == "failed" for u in usable if getattr(u.rec, dim) == value):
                (ops if dim == "op" else dtypes).add(value)
                break
        else:
            left.append(v)
    return dtypes, ops, left


@dataclass(frozen=True)
class Outcome:
    """What execution showed, shared by the refine rules."""

    prev: Decision
    usable: list[Variant]
    infra: list[Variant]
    dtypes: set[str]
    ops: set[str]
    unexplained: list[Variant]
    remaining: list[Variant]

    def exclusion_clause(self) -> str:
        if not (self.dtypes or self.ops):
            return ""
        culprit = next(v for v in self.usable
                       if v.status == "failed" and (v.rec.dtype in self.dtypes or v.rec.op in self.ops))
        what = " and ".join(x for x in (f"dtypes {', '.join(sorted(self.dtypes))}" * bool(self.dtypes),
                                        f"ops {', '.join(sorted(self.ops))}" * bool(self.ops)) if x)
        return f", with {what} excluded ({culprit.rec.variant} {culprit.verb()} with {culprit.why()})"

    def evidence(self) -> tuple[str, ...]:
        shown = sorted(self.usable + self.infra, key=lambda v: (v.status == "passed", v.rec.variant))
        lines = [v.line() for v in shown[:MAX_EVIDENCE]]
        if len(shown) > MAX_EVIDENCE:
            lines.append(f"... {len(shown) - MAX_EVIDENCE} more variants")
        return tuple(lines)

    def make(self, mode: Mode, reason: str, *, needs_review: bool = False, missing: Sequence[str] = ()) -> Decision:
        if self.infra:
            reason = f"{reason[:-1]}; {len(self.infra)} variant(s) lost to infrastructure errors."
            needs_review, missing = True, (*missing, "a rerun free of infrastructure errors")
        # A skip runs nothing, so it carries no edits.
        dtypes = [*self.prev.exclude_dtypes, *self.dtypes] if mode != "skip" else []
        ops = [*self.prev.exclude_ops, *self.ops] if mode != "skip" else []
        return decision(self.prev.test, mode, reason, self.evidence(), needs_review=needs_review, missing=missing,
                        exclude_dtypes=dtypes, exclude_ops=ops)


def _failure_rules(o: Outcome) -> Decision | None:
    if not o.unexplained:
        return None
    hard = [v for v in o.unexplained if v.hard]
    if hard:  # rule crash
        return o.make("skip", f"Skip: {hard[0].rec.variant} {hard[0].verb()} ({quote(hard[0].rec.message)}), and a "
                      "crash or hang takes down the worker running the shard.")
    first = o.unexplained[0]
    if all(v.status == "failed" for v in o.remaining):  # rule consistent_failure
        return o.make("xfail_strict", f"Xfail strict: every variant failed on every attempt with {first.why()}, so "
                      f"an unexpected pass will signal promotion{o.exclusion_clause()}.")
    passing = [v for v in o.remaining if v.status != "failed"]  # rule partial_failure
    return o.make("xfail", f"Xfail: {len(o.unexplained)} variant(s) fail beside {len(passing)} passing one(s) and no "
                  f"dtype or op separates them ({first.rec.variant}: {first.why()}).", needs_review=True,
                  missing=("which variants fail, as a dtype or op split",))


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
                      f"{_MODE_WORD[mode if mode != 'xfail_strict' else 'mandatory_success']} kept though flaky: "
                      f"{v.rec.variant} passed only on retry ({'/'.join(v.rec.outcomes)}, {v.why()})"
                      f"{o.exclusion_clause()}.", needs_review=True, missing=("stable results over more runs",))
    if mode == "xfail_strict":
        return o.make("mandatory_success", f"Mandatory success (promoted from xfail_strict): all {n} variant(s) passed "
                      f"on every attempt{o.exclusion_clause()}.")
    if mode == "xfail":
        return o.make("xfail", f"Xfail kept: all {n} variant(s) passed on every attempt, so promotion is proposed"
                      f"{o.exclusion_clause()}.", needs_review=True,
                      missing=("promotion proposed: passes consistently",))
    return o.make("mandatory_success", f"Mandatory success confirmed on the device: all {n} variant(s) passed on every "
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
            return decision(prev.test, prev.mode, f"{_MODE_WORD[prev.mode]} kept: {infra[0].rec.variant} hit an "
                            f"infrastructure error ({quote(infra[0].rec.message)}), which says nothing about the test.",
                            (v.line() for v in infra[:MAX_EVIDENCE]), needs_review=True,
                            missing=("a rerun free of infrastructure errors",), exclude_dtypes=prev.exclude_dtypes,
                            exclude_ops=prev.exclude_ops)
        if prev.mode == "skip":
            return prev
        skipped = variants[0].rec  # rule skipped
        return decision(prev.test, "skip", f"Skip: every variant was skipped on the device by the test itself "
                        f"({quote(skipped.message) if skipped.message else 'no reason given'}).",
                        (f"{v.rec.variant}: {'/'.join(v.rec.outcomes)}" for v in variants[:MAX_EVIDENCE]))
    failing = [v for v in usable if v.status == "failed"]
    dtypes, ops, unexplained = _attribute(failing, usable)
    remaining = [v for v in usable if v.rec.dtype not in dtypes and v.rec.op not in ops]
    if failing and not remaining:  # the whole test fails: no exclusion, the mode says so
        dtypes, ops, unexplained, remaining = set(), set(), failing, usable
    o = Outcome(prev, usable, infra, dtypes, ops, unexplained, remaining)
    if prev.mode == "skip":  # rule previous skip: execution only proposes
        if failing or any(v.status != "passed" for v in usable):
            return prev
        return decision(prev.test, "skip", f"Skip kept: all {len(usable)} variant(s) passed on the device, so "
                        f"promotion is proposed against the earlier reason: {prev.reason}", o.evidence(),
                        needs_review=True,
                        missing=("promotion proposed: passes on the device",))
    record = _failure_rules(o) or _pass_rules(o)
    return _capability_guard(record, req, backend)


class OfflineBrain:
    """The ``offline`` entry of the brain registry (see the module docstring)."""

    name = "offline"

    def __init__(self, settings: BrainSettings | None = None) -> None:
        self.settings = settings
        self.usage = Usage()

    def scope(self, requests: Sequence[ScopeRequest], ctx: BrainContext) -> list[FileDecision]:
        wishes = parse_preferences(ctx.backend.preferences)
        return [decide_scope(r, ctx.backend, wishes) for r in requests]

    def bucket(self, requests: Sequence[BucketRequest], ctx: BrainContext) -> list[Decision]:
        wishes = parse_preferences(ctx.backend.preferences)
        return [decide_bucket(r, ctx.backend, wishes) for r in requests]

    def refine(self, requests: Sequence[RefineRequest], ctx: BrainContext) -> list[Decision]:
        wishes = parse_preferences(ctx.backend.preferences)
        return [decide_refine(r, ctx.backend, wishes) for r in requests]
