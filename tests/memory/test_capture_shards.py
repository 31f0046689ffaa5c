"""The CPU capture's plan: which targets (files or node ids) each capture job runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from testcurator.memory.capture_shards import plan_targets
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


def test_a_sharded_capture_runs_each_file_in_one_job_and_records_durations(tmp_path: Path) -> None:
    from testcurator.memory.capture_shards import run_capture
    from testcurator.plugin.oprecord import read_records
    from testcurator.runner.durations import DurationStore
    from testcurator.runner.executors import LocalExecutor

    root = tmp_path / "tree"
    (root / "test").mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "test" / "test_a.py").write_text(
        "import pytest\n\ndef test_pass():\n    assert 1\n\ndef test_fail():\n    assert 0\n\n"
        "@pytest.mark.skip(reason='off')\ndef test_skip():\n    pass\n")
    (root / "test" / "test_b.py").write_text("def test_other():\n    assert 1\n")
    state, out = tmp_path / "state", tmp_path / "captured.jsonl"
    assert run_capture(root, ["test/test_a.py", "test/test_b.py"], out, tmp_path / "work", state_dir=state,
                       executor=LocalExecutor(), shards=2)
    outcomes = {r.nodeid: r.outcome for r in read_records(out) if r is not None}
    assert outcomes == {"test/test_a.py::test_pass": "passed", "test/test_a.py::test_fail": "failed",
                        "test/test_a.py::test_skip": "skipped", "test/test_b.py::test_other": "passed"}
    # each job was given only its own file (it collects nothing else)
    given = sorted((tmp_path / "work" / d / "targets.args").read_text() for d in ("1-of-2", "2-of-2"))
    assert given == ["test/test_a.py\n", "test/test_b.py\n"]
    with DurationStore(state) as store:
        timed = set(store.known())
    assert timed == {"test/test_a.py::test_pass", "test/test_a.py::test_fail", "test/test_b.py::test_other"}
