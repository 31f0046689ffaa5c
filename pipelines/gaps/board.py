"""The gap board: the held-back instances grouped per gap, each gap's alone and shared tests,
ranked by what implementing it frees.

A gap is an op (every overload and dtype row of it together: ``aten::dot`` with its dtypes), a
feature outside the dispatcher, or a dtype the profile does not declare. For a gap G and a test T
held back by it:

- T is **alone** for G when some instance of T is held back by G and nothing else, and, if the
  configs hold T back as a whole (skip, xfail), every other held-back instance of T needs nothing
  but G or a dtype the device does not declare (the config keeps skipping those dtypes; they do
  not stop T from running): implementing G makes T, or the instances of it that an edit cuts for
  G, runnable;
- else T is **shared**: it also needs the gaps ``shared_with`` names ("unattributed" when an
  instance of it is held back for a device reason no gap explains).

Ops and features rank by the tests they free alone, then the tests they share, then the
instances they hold back; the dtypes the device does not declare come after them, ranked alike.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from testcurator.pipelines.gaps.attribute import DTYPE, VIEW_COPY, GapId, Held
from testcurator.pipelines.gaps.enable import route
from testcurator.vocab import TestKey

#: Most severe first: a gap's status is the most severe of its rows.
STATUS_ORDER = ("crash", "wrong_result", VIEW_COPY, "missing_kernel", "unsupported_dtype", "error")
STATUS_WORDS = {"crash": "crash", "wrong_result": "wrong result", VIEW_COPY: "view returned as a copy",
                "missing_kernel": "missing kernel", "unsupported_dtype": "unsupported dtype", "error": "error"}
UNATTRIBUTED = GapId("unattributed", "unattributed")


@dataclass
class Gap:
    """One gap and what it holds back."""

    id: GapId
    cells: dict[str, str] = field(default_factory=dict)  # dtype -> status (the most severe there)
    cell_tests: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # dtype -> test keys
    details: list[str] = field(default_factory=list)  # calls or evidence lines, first seen first
    sources: set[str] = field(default_factory=set)
    tests: set[TestKey] = field(default_factory=set)
    instances: set[str] = field(default_factory=set)
    alone: set[TestKey] = field(default_factory=set)
    shared: dict[TestKey, set[GapId]] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)  # the enable-op commands that admit the alone tests
    unrouted: list[TestKey] = field(default_factory=list)  # alone tests no enable-op command admits

    @property
    def status(self) -> str:
        return min(self.cells.values(), key=STATUS_ORDER.index)

    @property
    def rank_key(self) -> tuple[int, int, int, str]:
        return (-len(self.alone), -len(self.shared), -len(self.instances), self.id.name)

    @property
    def shared_with(self) -> list[str]:
        return sorted({str(g) for gaps in self.shared.values() for g in gaps})


@dataclass
class Board:
    """The run's gaps, ranked, and what is held back without one."""

    run: str
    device: str
    evidence: str  # where the held-back instances come from
    gaps: list[Gap]  # ops and features, ranked
    dtypes: list[Gap]  # dtypes the device does not declare, ranked
    unattributed: dict[str, list[Held]]  # held back by the device, no gap: reason -> instances
    not_device: dict[str, list[Held]]  # held back by a preference, a decorator, the test itself
    held: int = 0  # held-back instances in all

    def ranked(self) -> list[Gap]:
        return self.gaps + self.dtypes


def _blocking(held: Held) -> set[GapId]:
    """The gaps that keep ``held``'s test from running: a dtype the device does not declare
    only costs the instance (the config skips it), and an unexplained hold is a gap of its own."""
    return {g for g in held.gaps if g.kind != DTYPE} if held.hits else {UNATTRIBUTED}


def _add_hits(gaps: dict[GapId, Gap], held: Held) -> None:
    for hit in held.hits:
        gap = gaps.setdefault(hit.gap, Gap(hit.gap))
        gap.tests.add(held.test)
        gap.instances.add(held.key)
        gap.sources.add(hit.source)
        if hit.detail not in gap.details:
            gap.details.append(hit.detail)
        for dtype in hit.dtypes:
            old = gap.cells.get(dtype, hit.status)
            gap.cells[dtype] = min((old, hit.status), key=STATUS_ORDER.index)
            gap.cell_tests[dtype].add(str(held.test))


def _alone_and_shared(gaps: Mapping[GapId, Gap], by_test: Mapping[TestKey, list[Held]],
                      whole: Collection[TestKey]) -> None:
    """Alone and shared per gap; ``whole``: the tests the configs hold back as a whole (a
    held-back mode), whose every instance must run before they do; the others run already,
    minus the instances an edit or a capability cuts."""
    for test, helds in by_test.items():
        blocking = set().union(*(_blocking(h) for h in helds)) if test in whole else set()
        for gap_id in set().union(*(h.gaps for h in helds)):
            gap = gaps[gap_id]
            freed = any(h.gaps == {gap_id} for h in helds)
            if freed and blocking <= {gap_id}:
                gap.alone.add(test)
            else:
                with_gap = {g for h in helds if gap_id in h.gaps for g in (h.gaps or {UNATTRIBUTED})}
                gap.shared[test] = (blocking | with_gap) - {gap_id}


def build(helds: Sequence[Held], *, run: str, device: str, evidence: str, whole: Mapping[TestKey, str],
          tail: str = "") -> Board:
    """The board of ``helds`` (pipelines/gaps/attribute.py); ``whole``: the tests held back as a
    whole and their reasons (see :func:`_alone_and_shared`); ``tail``: the options of the
    ``enable-op`` commands (pipelines/gaps/enable.py)."""
    gaps: dict[GapId, Gap] = {}
    by_test: dict[TestKey, list[Held]] = defaultdict(list)
    unattributed: dict[str, list[Held]] = defaultdict(list)
    not_device: dict[str, list[Held]] = defaultdict(list)
    for held in helds:
        if not held.device:
            not_device[held.why].append(held)
            continue
        by_test[held.test].append(held)
        _add_hits(gaps, held)
        if not held.hits:
            unattributed[held.why].append(held)
    _alone_and_shared(gaps, by_test, whole)
    for gap in gaps.values():
        found = route(gap.id, sorted(gap.alone), by_test, whole, tail)
        gap.commands, gap.unrouted = list(found.commands), list(found.unrouted)
    ranked = sorted(gaps.values(), key=lambda g: g.rank_key)
    return Board(run=run, device=device, evidence=evidence, gaps=[g for g in ranked if g.id.kind != DTYPE],
                 dtypes=[g for g in ranked if g.id.kind == DTYPE], unattributed=dict(unattributed),
                 not_device=dict(not_device), held=len(helds))


def _names(tests: Iterable[TestKey]) -> list[str]:
    return sorted({t.name for t in tests})


def gap_json(gap: Gap, rank: int) -> dict[str, Any]:
    """One gap as ``gaps --format json`` lists it."""
    return {"rank": rank, "name": str(gap.id), "op": gap.id.name if gap.id.kind != DTYPE else None, "kind": gap.id.kind,
            "status": gap.status, "dtypes": sorted(gap.cells), "by_dtype": dict(sorted(gap.cells.items())),
            "tests": _names(gap.tests), "test_keys": sorted(map(str, gap.tests)), "instances": sorted(gap.instances),
            "alone": _names(gap.alone), "alone_keys": sorted(map(str, gap.alone)),
            "shared": {str(t): sorted(map(str, w)) for t, w in sorted(gap.shared.items())},
            "shared_with": gap.shared_with, "evidence": gap.details[:5], "sources": sorted(gap.sources),
            "enable_op": gap.commands, "enable_op_misses": sorted(map(str, gap.unrouted))}


def _group_json(status: str, reason: str, helds: Sequence[Held]) -> dict[str, Any]:
    return {"rank": None, "op": None, "kind": status, "status": status, "reason": reason, "dtypes": [],
            "tests": _names(h.test for h in helds), "test_keys": sorted({str(h.test) for h in helds}),
            "instances": sorted(h.key for h in helds), "alone": [], "shared_with": []}


def board_json(board: Board) -> list[dict[str, Any]]:
    """The board as a list: the ranked gaps (ops and features, then dtypes), then what is held
    back without a gap (``status`` ``unattributed``, or ``not_the_device``), each with its reason."""
    out = [gap_json(g, i) for i, g in enumerate(board.ranked(), start=1)]
    out += [_group_json("unattributed", why, hs) for why, hs in sorted(board.unattributed.items())]
    return out + [_group_json("not_the_device", why, hs) for why, hs in sorted(board.not_device.items())]


def headline(board: Board) -> str:
    """One sentence: how many gaps hold back how many instances of how many tests."""
    tests = {h.test for hs in board.unattributed.values() for h in hs} | {t for g in board.ranked() for t in g.tests}
    instances = {i for g in board.ranked() for i in g.instances} | {
        h.key for hs in board.unattributed.values() for h in hs}
    return (f"What to implement next on {board.device} (run {board.run}): {len(board.gaps)} op/feature gap(s) and "
            f"{len(board.dtypes)} undeclared dtype(s) hold back {len(instances)} instance(s) of {len(tests)} test(s); "
            f"{sum(map(len, board.unattributed.values()))} of them with no gap found")
