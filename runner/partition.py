"""Every selected instance in exactly one shard: the legs' plans, and the check a merge makes.

A leg (``exec --shard K/N``) passes ``--curate-shard-plan`` to its first pytest, which
writes ``work/shard-plan.json``: the shard, how many items its collection saw and their
digest, the digest of the durations file it split by, the node ids it kept and the ones it
left to the other legs (:func:`testcurator.sharding.shard_plan`). The leg's manifest carries
it as ``shard_plan``.

A merge of run folders (``refine --results``, ``exec --shards N``) calls
:func:`check_partition` before it writes anything. Legs are grouped into matrices by their
shard count and the digest of what they collected; in each, the kept sets must be disjoint
(a leg given twice, a rerun, counts once) and cover the collection. Anything else is an
infrastructure failure (:class:`ExecutionError`, exit 3) naming the first 10 instances kept
by more than one leg and the first 10 kept by none: legs that split by different durations
(issue 22), or a leg whose results never arrived, would otherwise drop tests silently.
Folders without a plan (older manifests, merged folders, unsharded runs) are not checked.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from testcurator.errors import ExecutionError
from testcurator.sharding import ShardRef

PLAN_FILE = "shard-plan.json"
PLAN_KEY = "shard_plan"
SHOWN = 10  # instances named per kind of problem; the count says how many there are


def plan_path(out_dir: Path) -> Path:
    """Where a leg's pytest writes its plan (``--curate-shard-plan``), beside its logs."""
    return out_dir / "work" / PLAN_FILE


def read_plan(out_dir: Path, shard: str, since: float) -> dict[str, Any] | None:
    """This run's plan of shard ``shard``; None when its pytest wrote none (it died before the
    end of collection). A plan written before ``since`` is a previous run's in the same --out."""
    path = plan_path(out_dir)
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(plan, dict) or plan.get("shard") != shard or float(plan.get("written", 0)) < since:
        return None
    return plan


def plan_summary(plan: dict[str, Any]) -> dict[str, Any]:
    """A plan without its node id lists: what a merged manifest keeps of each leg's."""
    kept = plan.get("kept")
    return {key: value for key, value in plan.items() if key not in ("kept", "deselected")} | {
        "kept": len(kept) if isinstance(kept, list) else kept}


def _is_plan(plan: Any) -> bool:
    return isinstance(plan, dict) and isinstance(plan.get("kept"), list) and isinstance(plan.get("deselected"), list)


def check_partition(manifests: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """Raise :class:`ExecutionError` unless the legs among ``manifests`` partition what they
    collected (see module docstring); ``manifests`` are ``(source, manifest)`` pairs."""
    matrices: dict[tuple[int, str], list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for source, manifest in manifests:
        plan = manifest.get(PLAN_KEY)
        if _is_plan(plan):
            count = ShardRef.parse(str(plan["shard"])).count  # a mangled manifest is bad input (exit 2)
            matrices[(count, str(plan["collected_sha256"]))].append((source, plan))
    problems = [_problem(count, legs) for (count, _), legs in sorted(matrices.items())]
    found = [p for p in problems if p]
    if found:
        raise ExecutionError("\n".join(found))


def _problem(count: int, legs: list[tuple[str, dict[str, Any]]]) -> str | None:
    """What keeps one matrix's legs from partitioning their collection, or None."""
    owners: dict[str, set[str]] = defaultdict(set)
    for _, plan in legs:
        for nodeid in plan["kept"]:
            owners[nodeid].add(plan["shard"])
    first = legs[0][1]
    collected = set(first["kept"]) | set(first["deselected"])
    twice = sorted(n for n, shards in owners.items() if len(shards) > 1)
    never = sorted(collected - set(owners))
    absent = [f"{k}/{count}" for k in range(1, count + 1) if f"{k}/{count}" not in {p["shard"] for _, p in legs}]
    if not twice and not never:
        return None
    named = ", ".join(f"{plan['shard']} from {source}" for source, plan in legs)
    lines = [f"the {count} shards do not partition the selection ({len(collected)} instances collected; "
             f"legs: {named}): infrastructure, not a test result"]
    if twice:
        lines.append(f"  in more than one shard ({len(twice)}): " + ", ".join(
            f"{n} ({' '.join(sorted(owners[n]))})" for n in twice[:SHOWN]) + (" ..." if len(twice) > SHOWN else ""))
    if never:
        lines.append(f"  in no shard ({len(never)}): " + ", ".join(never[:SHOWN]) + (" ..." if len(never) > SHOWN else ""))
    if absent:
        lines.append(f"  no results from shard(s) {', '.join(absent)}")
    snapshots = {p["shard"]: p.get("durations_sha256") for _, p in legs}
    if len(set(snapshots.values())) > 1:
        lines.append("  the legs split by different durations (run every leg with the same snapshot: README "
                     "\"Shards\"): " + ", ".join(f"{s} {(d or 'none')[:12]}" for s, d in sorted(snapshots.items())))
    return "\n".join(lines)
