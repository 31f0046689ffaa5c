"""Splitting by duration: pytest-split's least_duration plus estimates and free skips."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from testcurator.errors import BadInputError
from testcurator.sharding import (DEFAULT_DURATION_S, MIN_DURATION_S, ShardRef, estimate, least_duration,
                                  known_load, read_test_durations, slowest_first, split,
                                  write_test_durations)


@pytest.mark.parametrize(("text", "index", "count"), [("1/1", 1, 1), ("2/8", 2, 8), (" 8 / 8 ", 8, 8)])
def test_shard_ref_parses(text: str, index: int, count: int) -> None:
    ref = ShardRef.parse(text)
    assert (ref.index, ref.count) == (index, count)
    assert str(ref) == f"{index}/{count}"


@pytest.mark.parametrize("text", ["", "3", "0/2", "3/2", "1/0", "a/b", "1/2/3", "-1/2"])
def test_shard_ref_rejects(text: str) -> None:
    with pytest.raises(BadInputError, match="K/N"):
        ShardRef.parse(text)


SLOW = {"test/weak.py::T::threaded": 6.0, "test/weak.py::T::quick": 0.01, "test/ufuncs.py::T::a": 0.5,
        "test/ufuncs.py::T::b": 0.2, "test/init.py::T::t": 1.0}


@pytest.mark.parametrize(("files", "root", "expected"), [
    # by each file's slowest known test, not its total
    (["test/ufuncs.py", "test/init.py", "test/weak.py"], None, ["test/weak.py", "test/init.py", "test/ufuncs.py"]),
    # a file with no known test may be slow: first; ties keep their order
    (["test/ufuncs.py", "test/new.py", "test/weak.py", "test/other.py"], None,
     ["test/new.py", "test/other.py", "test/weak.py", "test/ufuncs.py"]),
    # absolute paths are read relative to the tree's root
    (["/tree/test/init.py", "/tree/test/weak.py"], Path("/tree"), ["/tree/test/weak.py", "/tree/test/init.py"]),
    # node ids (a rerun's list) keep their order
    (["test/ufuncs.py::T::b", "test/weak.py::T::threaded"], None, ["test/ufuncs.py::T::b", "test/weak.py::T::threaded"]),
    ([], None, []),
])
def test_slowest_first_moves_whole_files(files: list[str], root: Path | None, expected: list[str]) -> None:
    assert slowest_first(files, SLOW, root) == expected


@pytest.mark.parametrize(("files", "root", "load"), [
    (["test/ufuncs.py", "test/init.py"], None, (1.7, 3)),
    (["/tree/test/weak.py"], Path("/tree"), (6.01, 2)),
    (["test/ufuncs.py", "test/new.py"], None, None),  # nothing known of a file: its load may be anything
    (["test/ufuncs.py::T::a"], None, None),  # a node id
    (["/elsewhere/test/weak.py"], Path("/tree"), None),
])
def test_the_known_load_of_files(files: list[str], root: Path | None, load: tuple[float, int] | None) -> None:
    found = known_load(files, SLOW, root)
    assert (found if found is None else (round(found[0], 2), found[1])) == load


def test_estimate_uses_file_median_then_global_median_then_default() -> None:
    known = {"a.py::t1": 1.0, "a.py::t2": 3.0, "a.py::t3": 10.0, "b.py::t1": 0.0}
    out = estimate(["a.py::new", "b.py::t1", "c.py::new", "a.py::t2"], known)
    assert out["a.py::new"] == 3.0  # median of a.py
    assert out["b.py::t1"] == MIN_DURATION_S  # a recorded zero still weighs something
    assert out["c.py::new"] == 2.0  # median of everything known
    assert out["a.py::t2"] == 3.0
    assert estimate(["x.py::t"], {}) == {"x.py::t": DEFAULT_DURATION_S}


def _ids(n: int) -> list[str]:
    return [f"test/test_f{i % 37}.py::TestX::test_{i}" for i in range(n)]


def test_every_test_lands_in_exactly_one_shard_and_skips_cost_nothing() -> None:
    ids = _ids(500)
    known = {n: 1.0 + (i % 5) for i, n in enumerate(ids)}
    skipped = set(ids[::3])
    shards = split(ids, known, 7, skipped)
    seen = [n for s in shards for n in s.nodeids]
    assert sorted(seen) == sorted(ids)
    for shard in shards:
        assert shard.expected_s == pytest.approx(sum(known[n] for n in shard.nodeids if n not in skipped))
        assert shard.runnable == sum(n not in skipped for n in shard.nodeids)
        assert list(shard.nodeids) == [n for n in ids if n in set(shard.nodeids)]  # collection order kept
    # Skips are dealt evenly, not piled onto the lightest shard.
    per_shard = [sum(n in skipped for n in s.nodeids) for s in shards]
    assert max(per_shard) - min(per_shard) <= 1


@pytest.mark.parametrize("count", [1, 2, 5, 10])
def test_no_empty_shard_while_there_are_enough_runnable_tests(count: int) -> None:
    ids = _ids(10)
    # One test dominates: a chunking split would give it and everything after it one shard.
    known = {ids[0]: 1000.0}
    shards = split(ids, known, count, skipped=ids[count:])
    assert all(s.runnable >= 1 for s in shards)


def test_same_inputs_same_shards_whatever_the_collection_order() -> None:
    ids = _ids(300)
    rng = random.Random(7)
    known = {n: rng.lognormvariate(0, 1) for n in ids[:200]}
    first = split(ids, known, 6, ids[:20])
    shuffled = ids[:]
    rng.shuffle(shuffled)
    second = split(shuffled, known, 6, ids[:20])
    assert [set(s.nodeids) for s in first] == [set(s.nodeids) for s in second]


def test_balance_follows_durations() -> None:
    ids = _ids(2000)
    rng = random.Random(3)
    known = {n: rng.paretovariate(2.0) * 0.05 for n in ids}
    shards = split(ids, known, 8)
    ideal = sum(known.values()) / 8
    assert max(s.expected_s for s in shards) <= 1.02 * ideal
    slow = {n: 0.1 for n in ids[:50]} | {ids[5]: 500.0}
    alone = split(ids[:50], slow, 2)
    assert any(s.nodeids == (ids[5],) for s in alone)


def test_durations_file_round_trip_and_errors(tmp_path: Path) -> None:
    path = tmp_path / ".test_durations"
    write_test_durations(path, {"b.py::t": 2.5, "a.py::t": 1.0})
    assert list(json.loads(path.read_text())) == ["a.py::t", "b.py::t"]
    assert read_test_durations(path) == {"a.py::t": 1.0, "b.py::t": 2.5}
    old = tmp_path / "old"
    old.write_text(json.dumps([["a.py::t", 3]]))
    assert read_test_durations(old) == {"a.py::t": 3.0}
    for body, match in (("{", "invalid JSON"), ('{"a": -1}', "seconds >= 0"), ('{"a": "1"}', "seconds"),
                        ("[1, 2]", "pairs"), ("3", "object")):
        bad = tmp_path / "bad"
        bad.write_text(body)
        with pytest.raises(BadInputError, match=match):
            read_test_durations(bad)


@pytest.mark.parametrize(("n", "count", "seed"), [(1, 1, 0), (7, 3, 1), (500, 8, 2), (3000, 64, 3), (40, 50, 4)])
def test_least_duration_splits_exactly_like_pytest_split(n: int, count: int, seed: int) -> None:
    from pytest_split.algorithms import Algorithms

    class Item(str):  # what pytest-split reads of an item: .nodeid, and str() for its name order
        @property
        def nodeid(self) -> str:
            return str.__str__(self)

    rng = random.Random(seed)
    ids = [f"test/test_{rng.randrange(9)}.py::T::test_{i}" for i in range(n)]
    # Ties on purpose: many tests share a duration, so the tie-breaking order matters.
    durations = {nid: float(rng.choice([0.5, 1.0, 1.0, 2.0, rng.random() * 10])) for nid in ids}
    theirs = Algorithms.least_duration.value(count, [Item(i) for i in ids], durations)
    ours, sums = least_duration(ids, durations, count)
    assert [[ids[i] for i in sorted(g)] for g in ours] == [[str(x) for x in g.selected] for g in theirs]
    assert sums == pytest.approx([g.duration for g in theirs])
