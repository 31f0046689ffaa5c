"""The offline brain's probe rule: a test that makes a call the device lacks cannot pass.

The capability probe (pipelines/probe.py) replayed every call (op overload x input dtypes)
the test made on CPU on the device; :class:`~testcurator.memory.capability.ProbeEvidence`
says which of them the device lacks and which instances make them. As the refine stage would
after running it: every kept instance fails -> ``xfail_strict`` (``xfail`` if a call kills
the process: the replay's example inputs are not the test's, and the draft confirms; ``skip``
if it hangs: the draft would wait out the timeout); the failing instances are exactly some
dtypes, OpInfo ops (whole, or in some dtypes: ``masked.std@complex64``) or ModuleInfos -> those
excluded (the ``Draft`` carries them to the mode a later rule gives); otherwise ``xfail``, for
review.
A plain (not device-generic) test never gets probe evidence: it runs on CPU on any backend;
nor does a device-generic test that never uses its device (facts.device_unused).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from testcurator.agents.brain import BackendContext, BucketRequest
from testcurator.agents.decision import Decision
from testcurator.agents.offline.facts import Draft, Facts, device_unused, expects_any_runtime_error
from testcurator.agents.offline.rules import decision, excluded_words, names, quote
from testcurator.memory.capability import ProbedInstance, ProbeEvidence
from testcurator.names import split_dtypes
from testcurator.plugin.callspec import call_words
from testcurator.vocab import op_at, op_excluded, op_words, split_op_at


MAX_SHOWN = 6
# The evidence line that records an exclusion the probe made ("probe excluded: module
# nn.LayerNorm"): refine reads it back (:func:`without_probe_exclusions`).
EXCLUDED = "probe excluded: "
NOTE = "probe: "  # every other evidence line the rule writes starts so
_FIELDS = {"dtype": "exclude_dtypes", "op": "exclude_ops", "module": "exclude_modules", "op at dtype": "exclude_ops"}
# The dimension tried first by the gaps an instance makes: a missing kernel is its op's; a
# dtype the device lacks is the dtype's; a crash, error or wrong result is its call's, made by
# the ops that make it, at the dtypes they make it at (upstream masked.std calls aten::_conj in
# complex64 only, which kills OpenReg's process: the ops of test_reductions that never call it
# pass in complex64, so excluding the dtype would cost them).
_ORDERS = {"missing_kernel": ("op", "dtype", "module", "op at dtype"),
           "unsupported_dtype": ("dtype", "op", "module", "op at dtype"),
           "call": ("op", "op at dtype", "dtype", "module")}


def from_probe(d: Decision) -> bool:
    """Whether the probe's evidence went into ``d`` (a prediction execution has to confirm)."""
    return any(e.startswith((NOTE, EXCLUDED)) for e in d.evidence)


def _gap_lines(probe: ProbeEvidence, calls: Sequence[str]) -> list[str]:
    return [f"{NOTE}{c} {probe.gaps[c][0]}: {quote(probe.gaps[c][1], 120)}" for c in calls[:MAX_SHOWN]]


def _attribute(failing: list[ProbedInstance], kept: list[ProbedInstance],
               probe: ProbeEvidence) -> tuple[dict[str, set[str]], list[ProbedInstance]]:
    """{dimension: values} whose every kept instance fails, and the failing instances they
    leave unexplained; a missing kernel is tried as an op first, like the refine stage does."""
    found: dict[str, set[str]] = {dim: set() for dim in _FIELDS}
    left = []
    for inst in failing:
        hit = next(((dim, value) for dim in _ORDERS[_kind(inst, probe)]
                    for value in _values(inst, dim) if all(i.gaps for i in kept if value in _values(i, dim))), None)
        if hit is None:
            left.append(inst)
        else:
            found[hit[0]].add(hit[1])
    return found, left


def _kind(inst: ProbedInstance, probe: ProbeEvidence) -> str:
    statuses = {probe.gaps[c][0] for c in inst.gaps}
    if "missing_kernel" in statuses:
        return "missing_kernel"
    return "unsupported_dtype" if statuses == {"unsupported_dtype"} else "call"


def _values(inst: ProbedInstance, dim: str) -> tuple[str, ...]:
    """The instance's values along ``dim``: each member of a dtype pair is a dtype of its own,
    as config exclusions name them."""
    if dim == "dtype":
        return split_dtypes(inst.dtype)
    if dim == "op at dtype":
        return tuple(op_at(inst.op, d) for d in split_dtypes(inst.dtype)) if inst.op else ()
    value = getattr(inst, dim)
    return (value,) if value else ()


def _excluded(inst: ProbedInstance, found: dict[str, set[str]]) -> bool:
    return (any(d in found["dtype"] for d in split_dtypes(inst.dtype))
            or op_excluded(inst.op, split_dtypes(inst.dtype), found["op"] | found["op at dtype"])
            or inst.module in found["module"])


def bucket_probe(req: BucketRequest, f: Facts, backend: BackendContext, d: Draft) -> Decision | None:
    probe = req.probe
    if probe is None or not probe.instances:
        return None
    if device_unused(req):  # its calls run on CPU on the backend's CI too
        d.evidence.append(f"{NOTE}not applied: the test never uses its device (its {probe.works + len(probe.gaps)} "
                          "distinct call(s) run on CPU)")
        return None
    instances = probe.instances
    if expects_any_runtime_error(req) and any(i.raised for i in instances):
        # its calls made to raise raise on the device too (a missing kernel is a RuntimeError)
        instances = tuple(replace(i, gaps=tuple(g for g in i.gaps if g not in i.raised)) for i in instances)
        d.evidence.append(f"{NOTE}calls the test makes to see a RuntimeError raise on CPU are no gap: the device's "
                          "NotImplementedError is one")
    kept = [i for i in instances if not d.excludes(i.dtype, i.op, i.module)
            and not (i.dtype and backend.dtype_unsupported(i.dtype))]
    failing = [i for i in kept if i.gaps]
    if not failing:
        d.evidence.append(f"{NOTE}all {probe.works} distinct call(s) it made ran on the device"
                          + (f" ({probe.not_probed} not replayable)" if probe.not_probed else ""))
        return None
    calls = sorted({c for i in failing for c in i.gaps})
    found, left = _attribute(failing, kept, probe)
    remaining = [i for i in kept if not _excluded(i, found)]
    if not left and remaining:
        d.exclude_dtypes += sorted(found["dtype"])
        d.exclude_ops += sorted(found["op"] | found["op at dtype"])
        d.exclude_modules += sorted(found["module"])
        what = excluded_words(found["dtype"], found["op"] | found["op at dtype"], found["module"])
        d.notes.append(f"{what} excluded (the probe found {names(calls, 3)} failing on the device)")
        d.evidence += _gap_lines(probe, calls)
        # An op at a dtype is an op exclusion (``exclude_ops``); its value says the dtype.
        d.evidence += [f"{EXCLUDED}{dim.split()[0]} {value}" for dim, values in found.items() for value in sorted(values)]
        return None
    first = calls[0]
    status, error = probe.gaps[first]
    said = f"the probe replayed {call_words(first)} on {backend.name}: {status} ({quote(error, 120)})"
    if len(failing) < len(kept):
        return decision(req.test, "xfail", f"Xfail: {said}; {len(failing)} of {len(kept)} instances make such "
                        f"calls and no dtype, op or module separates them{d.clause()}.", _gap_lines(probe, calls),
                        needs_review=True, missing=("which instances fail on the device, as a dtype, op or module split",),
                        **_edits(d))
    if any(probe.gaps[c][0] == "crash" for c in calls):
        crash = next(c for c in calls if probe.gaps[c][0] == "crash")
        if probe.gaps[crash][1].startswith("hang"):  # the draft would wait out the per-test timeout
            return decision(req.test, "skip", f"Skip: the probe's replay of {crash} hung "
                            f"({quote(probe.gaps[crash][1], 120)}), and every instance makes that call; a hang "
                            "costs the per-test timeout and takes down the worker running the shard.",
                            _gap_lines(probe, calls))
        # Not skip: the replay's inputs are an example of the test's (an out= tensor of another
        # size crashed where the test's own call passed, on OpenReg), and the runner survives a
        # crash; refine skips the test when the draft confirms it.
        return decision(req.test, "xfail", f"Xfail: the probe's replay of {crash} crashed the process "
                        f"({quote(probe.gaps[crash][1], 120)}), and every instance makes that call; the draft runs "
                        "it to confirm (a crash is recorded and the run goes on).", _gap_lines(probe, calls),
                        **_edits(d))
    more = f" and {len(calls) - 1} more failing call(s)" if len(calls) > 1 else ""
    return decision(req.test, "xfail_strict", f"Xfail strict: {said}{more}, and every instance makes such a call, "
                    f"so it fails until the device supports it; an unexpected pass will signal promotion{d.clause()}.",
                    _gap_lines(probe, calls), **_edits(d))


def _edits(d: Draft) -> dict[str, list[str]]:
    """What earlier rules excluded (a dtype the preferences rule out...) stays excluded."""
    return {"exclude_dtypes": d.exclude_dtypes, "exclude_ops": d.exclude_ops, "exclude_modules": d.exclude_modules}


def without_probe_exclusions(record: Decision) -> Decision:
    """``record`` less the exclusions the probe rule made (its evidence names them): for a
    test execution showed failing as a whole, they are moot, as the refine stage drops the
    exclusions of a test whose every variant fails."""
    made = [line.removeprefix(EXCLUDED).split(" ", 1) for line in record.evidence if line.startswith(EXCLUDED)]
    if not made:
        return record
    drop = {(_FIELDS[dim], value) for dim, value in made if dim in _FIELDS}
    return replace(record, **{f: tuple(v for v in getattr(record, f) if (f, v) not in drop) for f in _FIELDS.values()})


def probe_exclusion_note(record: Decision) -> str:
    """A sentence on the probe's exclusions ``record`` still carries: refine runs only what
    they leave, so the reason it writes after execution would not say why they are there."""
    made = [line.removeprefix(EXCLUDED).split(" ", 1) for line in record.evidence if line.startswith(EXCLUDED)]
    kept = [(dim, value) for dim, value in made if dim in _FIELDS and value in getattr(record, _FIELDS[dim])]
    if not kept:
        return ""
    ops = [value for dim, value in kept if dim == "op"]
    kept_words = [f"{dim} {value}" for dim, value in kept if dim != "op"]
    several = len({split_op_at(o)[0] for o in ops}) > 1
    kept_words += [f"op{'s' * several} {op_words(ops)}"] if ops else []
    calls = [line.removeprefix(NOTE).split(" ", 1)[0] for line in record.evidence if line.startswith(f"{NOTE}aten")]
    found = f" ({names(calls, 3)} failing on the device)" if calls else ""
    return f" The probe excluded {', '.join(kept_words)} before execution{found}."
