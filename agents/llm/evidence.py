"""What the model reads of a bucket or refine request: the evidence, in as few tokens as say
the same thing.

The request itself (agents/brain.py) stays whole: the rails, the cache keys and the fallback
brain read it. The view drops what only the machinery uses (the content hash), counts the CPU
outcomes instead of listing them, and folds the probe's findings per op: on the example, the
probe's call -> [status, full error] map and per-instance gap lists were 64% of a bucket
prompt's characters (one missing kernel repeated its 600-character dispatcher message for
every dtype signature). A slow endpoint reads ~80 prompt tokens a second, so the evidence's
size is the run's time (agents/llm/budget.py): 2.2x fewer characters on the example's 51 tests.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from testcurator.agents.brain import BucketRequest, RefineRequest, request_json
from testcurator.memory.capability import ProbeEvidence
from testcurator.plugin.callspec import split_key

ERROR_CHARS = 120
CPU_FAILURE_CHARS = 300
_EXC_PREFIX = re.compile(r"^[A-Za-z_.]*(Error|Exception|Warning): ")
# The error already says what the status says: an unsupported dtype needs no message.
_SELF_EXPLAINED = frozenset({"unsupported_dtype"})


def view(request: BucketRequest | RefineRequest) -> dict[str, Any]:
    """``request`` as the prompt shows it (a refine request: its bucket evidence viewed)."""
    if isinstance(request, RefineRequest):
        return {**request_json(request), "request": bucket_view(request.request)}
    return bucket_view(request)


def bucket_view(request: BucketRequest) -> dict[str, Any]:
    """A bucket request's evidence: empty fields left out, CPU outcomes counted, the probe folded."""
    data = request_json(request)
    out = {k: v for k, v in data.items() if v and k not in ("content_hash", "probe", "cpu_outcomes", "cpu_failure")}
    outcomes = Counter(request.cpu_outcomes)
    if outcomes:
        out["cpu_outcomes"] = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items()))
    if request.cpu_failure:
        out["cpu_failure"] = request.cpu_failure[:CPU_FAILURE_CHARS]
    if request.probe is not None:
        out["probe"] = probe_view(request.probe)
    return out


def probe_view(probe: ProbeEvidence) -> dict[str, Any]:
    """``gaps``: op -> "status (dtypes): first sentence of the error", one entry per op and
    status however many dtype signatures failed; ``instances_with_gaps``: per dtype, OpInfo op
    and module, how many of the test's instances make a failing call ("2 of 4")."""
    out: dict[str, Any] = {"calls_working": probe.works, "gaps": fold_gaps(probe.gaps)}
    if probe.not_probed:
        out["calls_not_probed"] = probe.not_probed
    counts: dict[str, list[int]] = {}
    for inst in probe.instances:
        for kind, value in (("dtype", inst.dtype), ("op", inst.op), ("module", inst.module)):
            if value:
                seen = counts.setdefault(f"{kind} {value}", [0, 0])
                seen[0] += bool(inst.gaps)
                seen[1] += 1
    if counts:
        out["instances_with_gaps"] = {key: f"{failing} of {total}" for key, (failing, total) in sorted(counts.items())}
    return out


def fold_gaps(gaps: Mapping[str, tuple[str, str]]) -> dict[str, str]:
    """The probe's failing calls (``aten::op(dtype,...)`` -> (status, error)) per op."""
    by_op: dict[tuple[str, str], tuple[set[str], str]] = {}
    for call, (status, error) in sorted(gaps.items()):
        op, dtypes = split_key(call)
        seen, message = by_op.setdefault((op, status), (set(), short_error(status, error)))
        seen.update(d for d in dtypes if d)
    out: dict[str, list[str]] = {}
    for (op, status), (dtypes, message) in by_op.items():
        where = f" ({', '.join(sorted(dtypes))})" if dtypes else ""
        out.setdefault(op, []).append(f"{status}{where}" + (f": {message}" if message else ""))
    return {op: "; ".join(parts) for op, parts in out.items()}


def short_error(status: str, error: str) -> str:
    """The error's first sentence without its exception class, at most :data:`ERROR_CHARS`."""
    if status in _SELF_EXPLAINED or not error.strip():
        return ""
    first = _EXC_PREFIX.sub("", error.strip().splitlines()[0])
    sentence = first.split(". ")[0].rstrip(".")
    return sentence if len(sentence) <= ERROR_CHARS else sentence[: ERROR_CHARS - 3].rstrip() + "..."
