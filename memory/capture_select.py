"""Which CPU instances the op capture runs, and the evidence the others get from them.

The capture runs tests on CPU to learn the aten calls they make; on real upstream files an
instance costs seconds and a test has thousands (an OpInfo test: ops x dtypes). Most of
that buys nothing for the device:

1. **Not on the device.** A test the device never instantiates (``only_for=("cpu",
   "cuda")``, ``@onlyCUDA``, a device-specific class) is decided without its ops: its CPU
   instances are not captured. Known from a collect-only pass on the device itself.
2. **Skipped upstream.** An instance pytest already skips at collection (``unittest.skip``)
   runs nothing on CPU either.
3. **Another dtype of the same kind.** The instances of one test that differ only in dtype
   within one dtype family (same OpInfo op, ModuleInfo and parameters; floating, reduced
   floating, integral, bool, complex: a family can take other paths, ``randint`` instead of
   ``uniform_``, and end otherwise on CPU)
   dispatch the same ops with other input dtypes: one of them is captured (the first of
   :data:`PREFERRED` it has), and the others
   get its record with the dtypes rewritten (:func:`project`): the probe then replays each
   projected call at its own dtype on the device, so dtype support is still decided per op.
   A projection has no CPU outcome: only captured instances say how a test ends on CPU.
4. **Ruled out by the profile.** An instance with a dtype the backend profile does not
   declare (``supported_dtypes``), or a complex or quantized dtype without the profile's
   ``complex``/``quantized`` hook, is skipped by the config whatever it does on CPU
   (config/apply.py; agents/offline/bucket.py decides such a test from the profile): a kind
   is captured through an instance the profile allows, and a kind with none is not captured
   (:class:`RuleOut`; ``testcurator run --capture-all`` lifts it). Its instances keep their
   static records, so the test is still decided, for the profile's reason.
5. **Over the budget.** With ``budget_s``, kinds are kept round-robin over the tests (every
   test's first kind, then every test's second...) while their estimated cost fits; within a
   round the files take turns (each file's first test, then each file's second...), so a
   budget too small for one kind per test still spreads over every file instead of filling
   up with the first files in path order. A test's next kind is one whose OpInfo op (or
   ModuleInfo) no kept kind covers yet, while it has one: the budget buys every op once
   before it buys one op in a second test.

This module needs no torch and no pytest: records in, records out.
"""

from __future__ import annotations

import json
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import zip_longest
from dataclasses import dataclass, field, replace
from typing import Any

from testcurator.names import split_dtypes
from testcurator.plugin.oprecord import OpRecord
from testcurator.vocab import TestKey, instance_key

# The dtype a kind's captured instance has, in order of preference: float32 is what a
# device supports first. int64 comes last of the integers: it is also the dtype of the
# index tensors many tests make, which a projection from int64 would retype with the rest.
PREFERRED = ("float32", "float64", "float16", "bfloat16", "int32", "int16", "int8", "uint8", "int64",
             "complex64", "complex128", "bool")
REDUCED_FLOATS = frozenset({"float16", "bfloat16", "half"})
NOT_ON_DEVICE = "not instantiated on the device"
SKIPPED_UPSTREAM = "skipped at collection upstream"
SAME_KIND = "another dtype of a captured kind (projected)"
OVER_BUDGET = "over the capture budget"
RULED_OUT = "ruled out by the profile"
# Dtypes that need a hook of their own beyond supported_dtypes (agents/offline/rules.py has the same sets).
HOOKED_DTYPES = {"complex": frozenset({"complex32", "complex64", "complex128", "chalf", "cfloat", "cdouble"}),
                 "quantized": frozenset({"qint8", "quint8", "qint32", "quint4x2", "quint2x4"})}
# file, generic, op, module, instance name without its dtype, the dtype's family
Kind = tuple[str, str, str, str, str, str]


def family(dtype: str) -> str:
    """``float32`` -> ``floating``; ``int64`` -> ``integral``; ``complex64`` -> ``complex``;
    ``bool`` is a family of its own (masks, logical ops: other kernels than the integers');
    so are the reduced-precision floats (``float16``, ``bfloat16``, ``float8_*``): an exact
    comparison that holds in float32 can fail in them on CPU itself (upstream
    ``test_scatter_reduce_sum`` in bfloat16 and float16), and only a captured instance says so."""
    if dtype in REDUCED_FLOATS or dtype.startswith("float8"):
        return "reduced_floating"
    if dtype.startswith("complex"):
        return "complex"
    if dtype.startswith(("int", "uint")):
        return "integral"
    return "floating" if dtype.startswith(("float", "bfloat", "half", "double")) else dtype


def kind_of(rec: OpRecord) -> Kind:
    """The instances of one test that differ only in dtype, within a family, share a kind."""
    key = TestKey.parse(rec.nodeid)
    name = key.test
    if rec.dtype and name.endswith("_" + rec.dtype):
        name = name[: -len(rec.dtype) - 1]
    families = ",".join(family(d) for d in split_dtypes(rec.dtype))
    return (key.file, rec.generic, rec.op or "", rec.module or "", name, families)


@dataclass(frozen=True)
class RuleOut:
    """What the backend profile already rules out, so the capture need not run it: instances
    with a dtype outside ``dtypes`` (the declared ``supported_dtypes``; None: not declared,
    nothing ruled out), or a complex/quantized dtype when ``hooks`` (declared) lacks that hook;
    and the tests ``tests(file, generic)`` names a reason for (a hook they need and the
    backend lacks: pipelines/capture_rules.py)."""

    dtypes: frozenset[str] | None = None
    hooks: frozenset[str] | None = None
    tests: Callable[[str, str], str | None] | None = None

    def reason(self, rec: OpRecord) -> str | None:
        """Why the profile rules ``rec`` out (a line of the report), or None."""
        why = self.tests(TestKey.parse(rec.nodeid).file, rec.generic) if self.tests is not None else None
        if why is not None:
            return why
        for dtype in split_dtypes(rec.dtype):
            if self.dtypes is not None and dtype not in self.dtypes:
                return f"{RULED_OUT}: dtype {dtype} is not in supported_dtypes"
            for hook, dtypes in HOOKED_DTYPES.items():
                if self.hooks is not None and dtype in dtypes and hook not in self.hooks:
                    return f"{RULED_OUT}: dtype {dtype} needs the {hook} hook"
        return None

    def describe(self) -> str:
        parts = [f"supported_dtypes {', '.join(sorted(self.dtypes))}" if self.dtypes is not None else "",
                 f"hooks {', '.join(sorted(self.hooks))}" if self.hooks is not None else "",
                 "the hooks the tests' source shows they need" if self.tests is not None else ""]
        return "; ".join(p for p in parts if p) or "nothing declared"


def _rank(rec: OpRecord) -> tuple[int, str]:
    first = (split_dtypes(rec.dtype) or ("",))[0]
    return (PREFERRED.index(first) if first in PREFERRED else len(PREFERRED), rec.nodeid)


@dataclass(frozen=True)
class Selection:
    """The instances to capture, the kind each other instance is projected from, and how many
    instances were left out per reason (:data:`NOT_ON_DEVICE` ...)."""

    keep: tuple[OpRecord, ...]
    source_of: Mapping[str, str] = field(default_factory=dict)  # node id -> the captured node id of its kind
    left_out: Mapping[str, int] = field(default_factory=dict)
    estimate_s: float = 0.0  # the kept instances' estimated CPU seconds

    def lines(self) -> str:
        """The ``--curate-only`` lines naming the kept instances by identity (plugin/only.py)."""
        return "".join(f"{instance_key(r.nodeid, r.generic)}\t{r.generic}\n" for r in self.keep)


def select(cpu: Iterable[OpRecord], on_device: Callable[[str, str], bool] | None, *,
           cost: Callable[[OpRecord], float], budget_s: float | None = None,
           rule_out: RuleOut | None = None) -> Selection:
    """What to capture of the CPU collection ``cpu`` (static records).

    ``on_device(file, generic)``: whether the device instantiates that test (None: unknown,
    every test counts). ``cost``: an instance's estimated CPU seconds; ``budget_s``: the most
    the kept instances may cost together (None: no limit); ``rule_out``: what the profile
    rules out (None: nothing)."""
    left: Counter[str] = Counter()
    kinds: dict[Kind, list[OpRecord]] = {}
    for rec in cpu:
        if rec.source != "static" or rec.error:
            continue
        if on_device is not None and not on_device(TestKey.parse(rec.nodeid).file, rec.generic):
            left[NOT_ON_DEVICE] += 1
        elif rec.outcome == "skipped":
            left[SKIPPED_UPSTREAM] += 1
        else:
            kinds.setdefault(kind_of(rec), []).append(rec)
    reps = _representatives(kinds, rule_out, left)
    kept, spent = _within_budget(reps, cost, budget_s)
    source_of: dict[str, str] = {}
    for kind, members in kinds.items():
        if kind not in reps:
            continue  # ruled out, counted per reason
        if kind not in kept:
            left[OVER_BUDGET] += len(members)
            continue
        for rec in members:
            if rec.nodeid != reps[kind].nodeid:
                source_of[rec.nodeid] = reps[kind].nodeid
                left[SAME_KIND] += 1
    keep = tuple(sorted((reps[k] for k in kept), key=lambda r: r.nodeid))
    return Selection(keep, source_of, dict(sorted(left.items())), round(spent, 1))


def _representatives(kinds: Mapping[Kind, list[OpRecord]], rule_out: RuleOut | None,
                     left: Counter[str]) -> dict[Kind, OpRecord]:
    """Each kind's instance to capture: the preferred one the profile allows. A kind whose
    every instance is ruled out has none; its instances are counted under their reasons."""
    reps: dict[Kind, OpRecord] = {}
    for kind, members in kinds.items():
        why = [rule_out.reason(r) if rule_out is not None else None for r in members]
        allowed = [r for r, reason in zip(members, why) if reason is None]
        if allowed:
            reps[kind] = min(allowed, key=_rank)
        else:
            left.update(reason for reason in why if reason is not None)
    return reps


def _within_budget(reps: Mapping[Kind, OpRecord], cost: Callable[[OpRecord], float],
                   budget_s: float | None) -> tuple[set[Kind], float]:
    """The kinds kept: all, or round-robin over the tests while the estimate fits the budget."""
    if budget_s is None:
        return set(reps), sum(cost(r) for r in reps.values())
    per_test: dict[tuple[str, str], list[Kind]] = {}
    for kind in sorted(reps, key=_turn_order):
        per_test.setdefault(kind[:2], []).append(kind)
    by_file: dict[str, list[list[Kind]]] = {}
    for (file, _), kinds in per_test.items():
        by_file.setdefault(file, []).append(kinds)
    turns = [_NextKind(kinds) for round_ in zip_longest(*by_file.values()) for kinds in round_ if kinds is not None]
    kept: set[Kind] = set()
    covered: set[str] = set()
    spent = 0.0
    while any(turns):
        for turn in turns:
            if turn:
                kind = turn.take(covered)
                seconds = cost(reps[kind])
                if spent + seconds <= budget_s:
                    kept.add(kind)
                    spent += seconds
                    covered.add(_subject(kind))
    return kept, spent


# The order of a test's kinds in the budget's turns: floating first (float32 is what a device
# supports first, and an OpInfo test's bool instance often skips itself: upstream
# test_reference_numerics_* in bool ran no op, and its op was then known from nothing else).
_FAMILY_TURN = ("floating", "integral", "reduced_floating", "bool", "complex")


def _turn_order(kind: Kind) -> tuple[str, str, int, Kind]:
    first = kind[5].split(",")[0]
    return kind[0], kind[1], _FAMILY_TURN.index(first) if first in _FAMILY_TURN else len(_FAMILY_TURN), kind


def _subject(kind: Kind) -> str:
    """What a kind exercises beyond its test: its OpInfo op or ModuleInfo ("" for neither)."""
    return kind[2] or kind[3]


class _NextKind:
    """One test's kinds in the budget's turns: first those whose op (or module) no kept kind
    covers yet, in order, then the rest. In plain order every OpInfo test of a file spent its
    turns on the alphabetically first ops: on upstream test_unary_ufuncs the budget captured
    ``_refs.*`` and ``a``-``l`` ops in 50 tests and ``sinh``, ``tan``, ``special.*`` in none,
    so nothing was known of the kernels those need (memory/capability.py reads an op's calls
    from any test that captured it)."""

    def __init__(self, kinds: Sequence[Kind]) -> None:
        self.pending, self.deferred = deque(kinds), deque[Kind]()

    def __bool__(self) -> bool:
        return bool(self.pending or self.deferred)

    def take(self, covered: set[str]) -> Kind:
        while self.pending and _subject(self.pending[0]) and _subject(self.pending[0]) in covered:
            self.deferred.append(self.pending.popleft())
        return self.pending.popleft() if self.pending else self.deferred.popleft()


# --- projection ------------------------------------------------------------------------------
def project(cpu: Iterable[OpRecord], captured: Sequence[OpRecord], selection: Selection) -> list[OpRecord]:
    """A record for every instance of ``cpu`` whose kind was captured through another dtype:
    the captured instance's ops, its calls and examples with its dtype rewritten to the
    instance's, and no outcome (it did not run)."""
    by_node: dict[str, list[OpRecord]] = {}
    # A capture process keeps one example per call, on the first record that made the call:
    # the captured instance's own calls may have theirs on another record.
    known: dict[str, str] = {}
    for rec in captured:
        by_node.setdefault(rec.nodeid, []).append(rec)
        for key, text in rec.examples.items():
            known.setdefault(key, text)
    out = []
    for rec in cpu:
        source = selection.source_of.get(rec.nodeid)
        for done in by_node.get(source, []) if source else []:
            out.append(_projected(done, rec, known))
    return out


def _projected(done: OpRecord, target: OpRecord, known: Mapping[str, str]) -> OpRecord:
    old, new = split_dtypes(done.dtype), split_dtypes(target.dtype)
    swap = dict(zip(old, new)) if len(old) == len(new) else {}
    calls = tuple(sorted({_call(c, swap) for c in done.calls}))
    raised = tuple(sorted({_call(c, swap) for c in done.raised}))
    examples = {_call(k, swap): _example(known[k], swap) for k in done.calls if k in known}
    return replace(done, nodeid=target.nodeid, dtype=target.dtype, outcome=None, failure=None, error=None,
                   calls=calls if swap else (), layouts=done.layouts if swap else (), examples=examples if swap else {},
                   raised=raised if swap else ())


def _call(key: str, swap: Mapping[str, str]) -> str:
    op, _, rest = key.partition("(")
    inner = rest.removesuffix(")")
    return f"{op}({','.join(swap.get(d, d) for d in inner.split(',')) if inner else ''})"


def _example(text: str, swap: Mapping[str, str]) -> str:
    return json.dumps(_swap(json.loads(text), swap))


def _swap(value: Any, swap: Mapping[str, str]) -> Any:
    if isinstance(value, list):
        return [_swap(v, swap) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: _swap(v, swap) for k, v in value.items()}
    for name in ("tensor", "dtype"):
        if isinstance(out.get(name), str):
            out[name] = swap.get(out[name], out[name])
    if "tensor" in out and "values" in out and out["tensor"] != value.get("tensor") and not dtype_holds(out["values"], out["tensor"]):
        del out["values"]
    return out


# The integers each integral dtype holds. A tensor's values are kept in its example only when
# it is integral or bool (indices, offsets, masks: plugin/callspec.py); retyped within its family,
# they stay where the new dtype holds every one of them. An index tensor retyped int32 -> int64
# (embedding_bag's indices and offsets beside a float16 weight) without its values became zeros,
# and upstream _embedding_bag_backward then read memory the example left unset: its CPU result
# changed from one replay to the next, and the probe called the device's wrong.
_INTEGRAL = {"bool": (0, 1), "uint8": (0, 2**8 - 1), "int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1),
             "uint16": (0, 2**16 - 1), "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1),
             "int64": (-2**63, 2**63 - 1), "uint64": (0, 2**64 - 1)}


def dtype_holds(values: Any, dtype: str) -> bool:
    """Whether ``dtype`` (integral or bool) holds each of ``values``; a floating or complex
    dtype takes none: its tensors are filled afresh, as any of that dtype is."""
    if dtype not in _INTEGRAL or not isinstance(values, list):
        return False
    low, high = _INTEGRAL[dtype]
    return all(isinstance(v, (bool, int)) and low <= v <= high for v in values)
