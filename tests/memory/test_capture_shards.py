"""The CPU capture's plan: which targets (files or node ids) each capture job runs."""

from __future__ import annotations

import pytest

from testcurator.memory.capture_shards import plan_targets
from testcurator.memory.stage import delta_keyword
from testcurator.vocab import TestKey

KNOWN = {"test/a.py::T::t1": 6.0, "test/a.py::T::t2": 4.0, "test/b.py::T::t": 1.0, "test/c.py::T::t": 1.0,
         "test/d.py::T::t": 8.0}


@pytest.mark.parametrize(("targets", "shards", "expected"), [
    # files weigh their known totals: a 10, d 8, b 1, c 1 -> {a}, {b, c, d}
    (["test/a.py", "test/b.py", "test/c.py", "test/d.py"], 2, [("test/a.py",), ("test/b.py", "test/c.py", "test/d.py")]),
    # never more jobs than targets, and no empty one
    (["test/a.py", "test/b.py"], 5, [("test/a.py",), ("test/b.py",)]),
    ([], 3, []),
    # one shard: everything, in the order given
    (["test/d.py", "test/a.py"], 1, [("test/d.py", "test/a.py")]),
    # node ids weigh their own durations
    (["test/a.py::T::t1", "test/a.py::T::t2", "test/d.py::T::t"], 2, [("test/d.py::T::t",), ("test/a.py::T::t1", "test/a.py::T::t2")]),
])
def test_plan_balances_targets_by_known_durations(targets: list[str], shards: int,
                                                  expected: list[tuple[str, ...]]) -> None:
    assert sorted(plan_targets(targets, KNOWN, shards)) == sorted(expected)


def test_an_unknown_file_weighs_the_median_known_file() -> None:
    # known totals a 10, b 1, d 8 -> median 8 for the new file: it pairs with b, not with a
    plan = plan_targets(["test/a.py", "test/b.py", "test/d.py", "test/new.py"], KNOWN, 2)
    assert sorted(plan) == [("test/a.py", "test/b.py"), ("test/d.py", "test/new.py")]


def test_the_plan_is_deterministic_and_covers_every_target_once() -> None:
    files = [f"test/f{i}.py" for i in range(50)]
    plan = plan_targets(files, {}, 7)
    assert plan == plan_targets(files, {}, 7)
    assert sorted(t for part in plan for t in part) == sorted(files)
    assert len(plan) == 7 and {len(part) for part in plan} <= {7, 8}


def test_delta_keyword_names_each_delta_test_once() -> None:
    only = {TestKey.parse("test/a.py::TestA::test_x"), TestKey.parse("test/b.py::TestB::test_x"),
            TestKey.parse("test/b.py::test_y")}
    assert delta_keyword(only) == "test_x or test_y"
