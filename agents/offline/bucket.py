"""The offline brain's stage 3, bucket: the decorator, hook, op, dtype and neighbour
rules that give a test its mode, tabled in agents/offline/brain.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from testcurator.agents.brain import BackendContext, BucketRequest
from testcurator.agents.decision import Decision
from testcurator.agents.offline.rules import (
    COMPLEX_DTYPES, CPU_FAILED, MODE_WORD, QUANTIZED_DTYPES, Wish, decision, effective_hooks, names, needed_features, quote,
    wishes_for,
)
from testcurator.agents.offline.facts import Deco, Draft, Facts, runs_on_cpu_only
from testcurator.agents.offline.probe import bucket_probe
from testcurator.agents.offline.scope import path_facts
from testcurator.config.profile import HOOKS
from testcurator.names import counted, every
from testcurator.vocab import FAILING, MODES, op_matches


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
_NEEDS_DEVICE = re.compile(r"(TEST_CUDA|TEST_MULTIGPU|TEST_CUDNN|torch\.cuda\.is_available\(\)|TEST_MPS|TEST_XPU"
                           r"|TEST_PRIVATEUSE1)")
_DECO = re.compile(r"^@?\s*(?P<name>[\w.]+)\s*(?:\((?P<args>.*)\))?\s*$", re.S)
MIN_SIMILARITY, MAX_NEIGHBOURS = 0.75, 5


def _decos(texts: Sequence[str]) -> tuple[Deco, ...]:
    out = []
    for text in texts:
        m = _DECO.match(text.strip())
        if m:
            out.append(Deco(m.group("name").rsplit(".", 1)[-1], m.group("args") or "", text.strip()))
    return tuple(out)


def _device_kind(device: str) -> str:
    return device if device in _TORCH_DEVICES else PU1


_PER_DEVICE = re.compile(r"^(?:dtypesIf|skip)(?P<kind>CPU|CUDA|MPS|XPU|HPU|XLA|LAZY|META|MTIA|PRIVATEUSE1)(?:If|$)")
_DEF = re.compile(r"^\s*(?:async\s+)?def\s", re.M)


def _applies_here(deco: Deco, backend: BackendContext) -> bool:
    """False for another device's decorator (``@dtypesIfMPS``, ``@skipCUDAIf``...): what it
    lists or skips is about that device only."""
    m = _PER_DEVICE.match(deco.short)
    return m is None or m.group("kind").lower() == _device_kind(backend.device)


def _needs_text(req: BucketRequest, decos: Sequence[Deco], backend: BackendContext) -> str:
    """The text the feature rules read: the decorators that apply on the backend's device and
    the test's body (its decorator lines are in ``decos`` already, whole)."""
    body = req.source
    first_def = _DEF.search(body)
    if first_def is not None:
        body = body[first_def.start():]
    return "\n".join((*(d.text for d in decos if _applies_here(d, backend)), body, req.summary))


def _allowed(deco: Deco) -> frozenset[str] | None:
    quoted = frozenset(re.findall(r"[\'\"](\w+)[\'\"]", deco.args))
    if deco.short == "onlyOn":
        return quoted
    if deco.short == "onlyNativeDeviceTypesAnd":
        return _NATIVE | {PU1} | quoted
    if deco.short in ("skipIf", "skipUnless") and (flags := _NEEDS_DEVICE.findall(deco.args)):
        negated = deco.args.lstrip().startswith("not ")
        devices = frozenset(_flag_device(flag) for flag in flags)
        # `not (TEST_CUDA or TEST_PRIVATEUSE1)` runs on either device (upstream test_dropout's
        # corner case, read as "restricts it to cuda" and skipped on OpenReg, where it passes);
        # flags joined by `and` say nothing plain about one device.
        if negated == (deco.short == "skipIf") and (len(devices) == 1 or " and " not in deco.args):
            return devices
    return _ONLY.get(deco.short)


def _flag_device(flag: str) -> str:
    return "mps" if "MPS" in flag else "xpu" if "XPU" in flag else PU1 if "PRIVATEUSE1" in flag else "cuda"


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


def bucket_fails_on_cpu(req: BucketRequest, f: Facts, backend: BackendContext, d: Draft) -> Decision | None:
    """Every instance the capture ran on CPU, the reference device, failed: the test fails
    upstream as well (a test bug, or skew between the upstream file and the installed torch
    or numpy), which says nothing about the backend. Expected to fail there too: xfail."""
    ran = [o for o in req.cpu_outcomes if o != "skipped"]
    if not ran or any(o not in FAILING for o in ran):
        return None
    failure = quote(req.cpu_failure) if req.cpu_failure else "no error line recorded"
    return decision(req.test, "xfail", f"Xfail: it fails on CPU too, the reference device: {every(len(ran), 'instance')} "
                    f"the capture ran there failed ({failure}), so the failure is not {backend.name}'s.",
                    (f"{CPU_FAILED}{len(ran)} of {counted(len(ran), 'instance')} failed", f"CPU failure: {failure}"))


def bucket_partly_fails_on_cpu(req: BucketRequest, f: Facts, backend: BackendContext, d: Draft) -> Decision | None:
    """Some instances fail on CPU, the reference device, beside passing ones: those fail
    upstream whatever the backend does, so a mandatory test would be red on any device.
    Tried after the rules that skip, so a test the device cannot run stays skipped; not
    strict, as the instances that pass on CPU may pass on the device."""
    ran = [o for o in req.cpu_outcomes if o != "skipped"]
    failed = sum(o in FAILING for o in ran)
    if not failed or failed == len(ran):
        return None
    if req.cpu_failed and all(d.excludes(*kind) for kind in req.cpu_failed):
        # The edits so far leave out every instance that failed there (corpus test_batch_vs_slicing:
        # frexp's, excluded for the kernel the device lacks): the CPU says nothing of the rest.
        d.evidence.append(f"{CPU_FAILED}{failed} of {counted(len(ran), 'instance')} failed, each left out by the edits")
        return None
    failure = quote(req.cpu_failure) if req.cpu_failure else "no error line recorded"
    return decision(req.test, "xfail", f"Xfail: it fails on CPU too, the reference device: {failed} of the "
                    f"{counted(len(ran), 'instance')} the capture ran there failed ({failure}), beside "
                    f"{counted(len(ran) - failed, 'passing one', 'passing ones')}; those fail whatever "
                    f"{backend.name} does{d.clause()}.",
                    (f"{CPU_FAILED}{failed} of {counted(len(ran), 'instance')} failed", f"CPU failure: {failure}",
                     *d.evidence),
                    needs_review=True, missing=("which instances fail upstream, as a dtype or parameter split",),
                    exclude_dtypes=d.exclude_dtypes, exclude_ops=d.exclude_ops, exclude_modules=d.exclude_modules)


def bucket_needs(req: BucketRequest, f: Facts, backend: BackendContext, d: Draft) -> Decision | None:
    excluded = {**wishes_for(f.wishes, "exclude", "hook"), **wishes_for(f.wishes, "exclude", "area")}
    for need, shown in f.needs.items():
        if need in excluded:
            wish = excluded[need]
            return decision(req.test, "skip", f"Skip: it needs {need} ({shown}), which the {wish.quote()} excludes.",
                            (shown, wish.quote()))
        if f.hooks is not None and need in HOOKS and need not in f.hooks:
            if runs_on_cpu_only(req):
                d.notes.append(f"the {need} hook it needs ({shown}) not in question: it runs on CPU only (not "
                               "device-generic, names no device) and passed there")
                d.evidence.append(f"needs {need} ({shown}); runs on CPU only")
                continue
            return decision(req.test, "skip", f"Skip: it needs the {need} hook ({shown}), which the backend does "
                            f"not implement.", (shown, f"backend hooks: {', '.join(sorted(f.hooks)) or 'none'}"))
    return None


# A test that registers privateuse1's device module, or renames the backend, for a dummy of its
# own: in a process where the privateuse1 backend under test is loaded, torch refuses ("The
# runtime module of 'openreg' has already been registered").
_TAKES_PRIVATEUSE1 = re.compile(r"_register_device_module\(\s*[\"']privateuseone[\"']|rename_privateuse1_backend\(")


def bucket_takes_privateuse1(req: BucketRequest, f: Facts, backend: BackendContext, d: Draft) -> Decision | None:
    match = _TAKES_PRIVATEUSE1.search(req.source) if _device_kind(backend.device) == PU1 else None
    if match is None:
        return None
    line = req.source[req.source.rfind("\n", 0, match.start()) + 1:].split("\n", 1)[0]
    return decision(req.test, "xfail", f"Xfail: it registers privateuse1's device module or name for a dummy "
                    f"backend of its own (source: {quote(line)}), which {backend.name}, the privateuse1 backend "
                    f"loaded in the same process, already holds; the draft confirms.", (f"source: {quote(line)}",),
                    needs_review=True, missing=("result on device",))


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
    return decision(req.test, top, f"{MODE_WORD[top]}: no ops are known for it, and {len(cited)} of {len(close)} "
                    f"close neighbours are {top} ({names(f'{s.test} {s.score:.2f}' for s in cited)}; nearest says "
                    f"{quote(cited[0].reason, 100)}){d.clause()}.",
                    (*(f"similar: {s.test} ({s.score:.2f}) {s.mode}" for s in close), *d.evidence), needs_review=True,
                    missing=("ATen ops the test calls (op map)", "result on device"),
                    exclude_dtypes=d.exclude_dtypes if top != "skip" else (),
                    exclude_ops=d.exclude_ops if top != "skip" else (),
                    exclude_modules=d.exclude_modules if top != "skip" else ())


def bucket_default(req: BucketRequest, f: Facts, backend: BackendContext, d: Draft) -> Decision:
    evidence = list(d.evidence)
    review, missing = False, ()
    if req.aten_ops and req.probe is not None and req.probe.instances:
        basis = (f"the {req.probe.works} distinct call(s) of the {len(req.aten_ops)} ATen ops it called on CPU "
                 f"({names(req.aten_ops, 4)}) ran on the device when the probe replayed them")
    elif req.aten_ops:
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
                    needs_review=review, missing=missing, exclude_dtypes=d.exclude_dtypes, exclude_ops=d.exclude_ops,
                    exclude_modules=d.exclude_modules)


BucketRule = Callable[[BucketRequest, Facts, BackendContext, Draft], "Decision | None"]
BUCKET_RULES: tuple[tuple[str, BucketRule], ...] = (
    ("other_device", bucket_other_device), ("upstream_skip", bucket_upstream_skip),
    ("fails_on_cpu", bucket_fails_on_cpu), ("takes_privateuse1", bucket_takes_privateuse1), ("needs", bucket_needs),
    ("known_missing_op", bucket_known_missing_op), ("ops", bucket_ops), ("dtypes", bucket_dtypes),
    ("probe", bucket_probe), ("partly_fails_on_cpu", bucket_partly_fails_on_cpu), ("similar", bucket_similar),
    ("default", bucket_default),
)


def decide_bucket(req: BucketRequest, backend: BackendContext, wishes: Sequence[Wish]) -> Decision:
    decos = _decos(req.decorators)
    text = _needs_text(req, decos, backend)
    needs = needed_features(req.test, text, (*req.aten_ops, *req.layout_ops), dtypes_listed=bool(req.dtypes))
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
