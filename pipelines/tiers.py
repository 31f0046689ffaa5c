"""Seed 000's cost-versus-coverage ladder over a curated config: tiers L1, L2 and L3.

- **L1**: the fewest, cheapest instances that still exercise every aten op the backend
  supports, within a time budget. The ops are those the config's must-pass instances
  dispatch (captured on CPU by the memory stage: a must-pass test ran green on the device,
  so its ops work there); each instance costs its recorded duration on the device (else
  on CPU, else an estimate). Weighted set cover, greedy (the classic ln(n)-approximation:
  take the instance with the most new ops per second, lazily re-scored), skipping what no
  longer fits the budget, then dropping picks that later picks made redundant. Ops that
  no affordable instance reaches are listed.
- **L2**: the curated suite, as the config says.
- **L3**: L2 plus what the config holds back, run as strict-xfail probes: instances
  skipped by an edit or a missing capability, and ``xfail`` entries (made strict). An
  unexpected pass is the signal that something newly works (``config.apply.probe``).

``tiers`` writes the plan as JSON (``tiers.json`` beside the config by default); ``exec
--tier L1`` reads it and the plugin keeps only L1's instances (by file, generic name, op,
dtype and module, so the device's instances match the CPU capture's).
"""

from __future__ import annotations

import heapq
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testcurator.config.apply import decide
from testcurator.config.resolve import LoadedConfig
from testcurator.files import atomic_write_text
from testcurator.memory.opmap import OpRecord
from testcurator.names import TestIdentity, formatted_op
from testcurator.sharding import estimate, file_of
from testcurator.tiers import TIERS_FILE, tier_key
from testcurator.vocab import XFAIL_MODES

HELD_BACK = ("edit", "capability")


@dataclass(frozen=True)
class Candidate:
    key: str
    nodeid: str
    ops: frozenset[str]
    cost: float


@dataclass
class TierPlan:
    budget_s: float
    l1: list[Candidate] = field(default_factory=list)
    ops_total: int = 0
    uncovered: list[str] = field(default_factory=list)
    l2: dict[str, float] = field(default_factory=dict)  # key -> expected seconds
    l3_extra: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        covered = set().union(*(c.ops for c in self.l1)) if self.l1 else set()
        return {
            "budget_s": self.budget_s,
            "L1": {"instances": len(self.l1), "expected_s": round(sum(c.cost for c in self.l1), 3),
                   "ops_covered": len(covered), "ops_total": self.ops_total, "uncovered_ops": self.uncovered,
                   "keys": sorted(c.key for c in self.l1), "nodeids": sorted(c.nodeid for c in self.l1)},
            "L2": {"instances": len(self.l2), "expected_s": round(sum(self.l2.values()), 3)},
            "L3": {"instances": len(self.l2) + len(self.l3_extra),
                   "expected_s": round(sum(self.l2.values()) + sum(self.l3_extra.values()), 3),
                   "probes": len(self.l3_extra)},
        }


def device_nodeid(cpu_nodeid: str, device: str) -> str:
    """``TestFooCPU::test_bar_cpu_float32`` -> ``TestFooCURATEDEV::test_bar_curatedev_float32``."""
    parts = cpu_nodeid.split("::")
    if len(parts) >= 3 and parts[-2].endswith("CPU"):
        parts[-2] = parts[-2][: -len("CPU")] + device.upper()
        tokens = parts[-1].split("_")
        for i in range(len(tokens) - 1, 0, -1):
            if tokens[i] == "cpu":
                tokens[i] = device
                break
        parts[-1] = "_".join(tokens)
    return "::".join(parts)


def _identity(record: OpRecord) -> TestIdentity:
    cls, _, test = record.generic.rpartition("::")
    return TestIdentity(cls=cls, test=test, device=record.device, dtype=record.dtype, op=record.op,
                        op_variant=op_variant(record), module=record.module)


def op_variant(record: OpRecord) -> str | None:
    """The OpInfo variant its test's name carries (``test_fn_grad_div_floor_rounding_cpu_float64``:
    ``floor_rounding``), which capture records do not keep and a config may exclude alone."""
    if record.op is None:
        return None
    name = record.nodeid.rpartition("::")[2]
    head = f"{record.generic.rpartition('::')[2]}_{formatted_op(record.op)}_"
    tail = "".join(f"_{part}" for part in (record.device, record.dtype) if part)
    if not (name.startswith(head) and name.endswith(tail)):
        return None
    return name[len(head):len(name) - len(tail)] or None


def _costs(records: Sequence[OpRecord], known: Mapping[str, float], device: str | None) -> dict[str, float]:
    """Seconds per captured node id: its device instance's duration, else its own."""
    own = {r.nodeid: known[device_nodeid(r.nodeid, device)] for r in records
           if device and device_nodeid(r.nodeid, device) in known}
    for r in records:
        if r.nodeid not in own and r.nodeid in known:
            own[r.nodeid] = known[r.nodeid]
    return estimate([r.nodeid for r in records], own)


def cover(candidates: Iterable[Candidate], budget_s: float) -> tuple[list[Candidate], set[str]]:
    """Greedy weighted set cover under a budget: (chosen, ops left uncovered)."""
    pool = [c for c in candidates if c.ops]
    universe = set().union(*(c.ops for c in pool)) if pool else set()
    covered: set[str] = set()
    chosen: list[Candidate] = []
    spent = 0.0
    # (-gain per second, cost, key): ties go to the cheaper, then to the name (determinism).
    heap = [(-len(c.ops) / c.cost, c.cost, c.key, i) for i, c in enumerate(pool)]
    heapq.heapify(heap)
    while heap and covered != universe:
        _, cost, key, i = heapq.heappop(heap)
        gain = len(pool[i].ops - covered)
        if gain == 0 or spent + cost > budget_s:
            continue
        score = -gain / cost
        if heap and score > heap[0][0]:  # stale: re-score and let a better one go first
            heapq.heappush(heap, (score, cost, key, i))
            continue
        chosen.append(pool[i])
        covered |= pool[i].ops
        spent += cost
    return _prune(chosen), universe - covered


def _prune(chosen: list[Candidate]) -> list[Candidate]:
    """Drop what later picks made redundant (a cheap early pick whose ops all came again),
    costliest first: greedy alone can keep them."""
    holders = Counter(op for c in chosen for op in c.ops)
    dropped: set[str] = set()
    for item in sorted(chosen, key=lambda c: (-c.cost, c.key)):
        if all(holders[op] > 1 for op in item.ops):
            holders.subtract(item.ops)
            dropped.add(item.key)
    return [c for c in chosen if c.key not in dropped]


def plan_tiers(
    loaded: LoadedConfig, torch_root: Path, records: Iterable[OpRecord], known: Mapping[str, float],
    budget_s: float, device: str | None = None,
) -> TierPlan:
    """Tiers for ``loaded`` from the captured op map and the durations."""
    records = list(records)
    costs = _costs(records, known, device)
    files: dict[str, Any] = {}
    plan = TierPlan(budget_s)
    candidates: dict[str, Candidate] = {}
    for record in records:
        rel = file_of(record.nodeid)
        if rel not in files:
            files[rel] = loaded.file_for(torch_root / rel)
        applied = decide(loaded, files[rel], _identity(record))
        key = tier_key(rel, record.generic, record.op, record.dtype, record.module)
        if applied.mode == "mandatory_success":
            plan.l2[key] = plan.l2.get(key, 0.0) + costs[record.nodeid]
            old = candidates.get(key)
            ops = frozenset(record.aten) | (old.ops if old else frozenset())
            candidates[key] = Candidate(key, record.nodeid, ops, costs[record.nodeid] + (old.cost if old else 0.0))
        elif applied.mode in XFAIL_MODES:
            plan.l2[key] = plan.l2.get(key, 0.0) + costs[record.nodeid]
        elif applied.origin in HELD_BACK:
            plan.l3_extra[key] = plan.l3_extra.get(key, 0.0) + costs[record.nodeid]
    chosen, uncovered = cover(sorted(candidates.values(), key=lambda c: c.key), budget_s)
    plan.l1 = chosen
    plan.ops_total = len(set().union(*(c.ops for c in candidates.values()))) if candidates else 0
    plan.uncovered = sorted(uncovered)
    return plan


def default_tiers_file(config: Path) -> Path:
    return (config / TIERS_FILE) if config.is_dir() else config.with_name(config.stem + "." + TIERS_FILE)


def write_plan(path: Path, plan: TierPlan) -> None:
    atomic_write_text(path, json.dumps(plan.to_json(), indent=1) + "\n")
