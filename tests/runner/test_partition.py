"""A merge of shard legs checks they partition what they collected (runner/partition.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testcurator.errors import ExecutionError
from testcurator.runner.partition import check_partition, plan_path, plan_summary, read_plan
from testcurator.sharding import ShardRef, shard_plan, split

IDS = [f"test_x.py::TestX::test_{i:02d}" for i in range(30)]


def legs(count: int, known: dict[str, float] | None = None, ids: list[str] = IDS) -> list[dict[str, Any]]:
    """The manifests of a matrix's legs, every leg splitting by ``known``."""
    shards = split(ids, known or {}, count)
    return [{"tests": {}, "shard_plan": shard_plan(ShardRef(k, count), ids, shards[k - 1], "d" * 64)}
            for k in range(1, count + 1)]


def pairs(manifests: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"leg{i}", m) for i, m in enumerate(manifests)]


def test_legs_of_one_snapshot_pass_and_a_rerun_counts_once() -> None:
    three = legs(3)
    check_partition(pairs(three))
    check_partition(pairs([*three, three[1]]))  # leg 2 rerun: its folder given twice
    check_partition(pairs([*three, *legs(2, ids=IDS[:7])]))  # two matrices side by side, each whole
    check_partition([("old", {"tests": {}}), ("unsharded", {"tests": {}, "shard_plan": None})])


def test_overlap_and_missing_are_named_first_ten() -> None:
    skewed = legs(3, dict.fromkeys(IDS, 0.01) | {IDS[5]: 100.0})
    mixed = [legs(3)[0], skewed[1], legs(3)[2]]
    mixed[1]["shard_plan"]["durations_sha256"] = "e" * 64
    with pytest.raises(ExecutionError) as info:
        check_partition(pairs(mixed))
    kept = [set(m["shard_plan"]["kept"]) for m in mixed]
    twice = sorted((kept[0] & kept[1]) | (kept[1] & kept[2]) | (kept[0] & kept[2]))
    never = sorted(set(IDS) - kept[0] - kept[1] - kept[2])
    text = str(info.value)
    assert info.value.exit_code == 3
    assert f"in more than one shard ({len(twice)}): {twice[0]} (" in text
    assert f"in no shard ({len(never)}): {', '.join(never[:10])}" in text
    assert (" ..." in text) == (len(twice) > 10 or len(never) > 10)
    assert "different durations" in text and "2/3 eeeeeeeeeeee" in text


def test_a_missing_leg_is_named_with_what_it_held() -> None:
    three = legs(3)
    with pytest.raises(ExecutionError, match=r"no results from shard\(s\) 2/3") as info:
        check_partition(pairs([three[0], three[2]]))
    held = sorted(three[1]["shard_plan"]["kept"])
    assert f"in no shard ({len(held)}): {', '.join(held[:10])}" in str(info.value)


def test_a_plan_is_read_only_when_this_run_wrote_it(tmp_path: Path) -> None:
    path = plan_path(tmp_path)
    path.parent.mkdir()
    plan = legs(2)[0]["shard_plan"] | {"written": 100.0}
    path.write_text(json.dumps(plan))
    assert read_plan(tmp_path, "1/2", since=99.0) == plan
    assert read_plan(tmp_path, "1/2", since=101.0) is None  # a previous run's, in the same --out
    assert read_plan(tmp_path, "2/2", since=99.0) is None
    path.write_text("{not json")
    assert read_plan(tmp_path, "1/2", since=0.0) is None
    assert plan_summary(plan)["kept"] == len(plan["kept"]) and "deselected" not in plan_summary(plan)
