"""Issue 22: `exec --shard K/N` legs run one after another in ONE state directory partition the
selection exactly (each leg records durations, but every leg splits by the same frozen
snapshot), and a merge of legs that do not partition it is an infrastructure failure (exit 3).

Everything runs through the installed `testcurator` entry point, on a small device-generic
tree in PyTorch's style written to a temporary folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TC = str(Path(sys.executable).with_name("testcurator"))
# The module's runs are made once, on one worker (--dist loadfile, pyproject.toml).

DEVICE_GENERIC = '''
import time

import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase, instantiate_parametrized_tests, parametrize


class TestShardMe(TestCase):
    @dtypes(torch.float32, torch.float64, torch.int64)
    def test_add(self, device, dtype):
        x = torch.ones(4, device=device, dtype=dtype)
        self.assertEqual((x + x).sum().item(), 8)

    # Measured durations that differ: what each leg records changes the next leg's balance.
    @parametrize("ms", [0, 30, 90, 180])
    def test_sleep(self, device, ms):
        time.sleep(ms / 1000)

    @dtypes(torch.float32, torch.int32)
    def test_held_back(self, device, dtype):
        raise AssertionError("the config skips me")

    def test_view(self, device):
        self.assertEqual(torch.arange(6, device=device).view(2, 3).shape, (2, 3))


instantiate_device_type_tests(TestShardMe, globals(), only_for="cpu")


class TestPlain(TestCase):
    @parametrize("k", [1, 2, 3])
    def test_q(self, k):
        time.sleep(0.01 * k)


instantiate_parametrized_tests(TestPlain)
'''

OTHER_FILE = '''
import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase


class TestOther(TestCase):
    @dtypes(torch.float32, torch.float64, torch.int16, torch.int64)
    def test_zeros(self, device, dtype):
        self.assertEqual(torch.zeros(3, device=device, dtype=dtype).sum().item(), 0)


instantiate_device_type_tests(TestOther, globals(), only_for="cpu")
'''

CONFIG = """
test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test_dev.py
      unlisted_test_mode: mandatory_success
      tests:
        - names: [TestShardMe::test_held_back]
          mode: skip
    - path: ${TORCH_ROOT}/test_other.py
      unlisted_test_mode: mandatory_success
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    (root / "test_dev.py").write_text(DEVICE_GENERIC)
    (root / "test_other.py").write_text(OTHER_FILE)
    (root / "config.yaml").write_text(CONFIG)
    return root


def tc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200")
    env.pop("TESTCURATOR_STATE_DIR", None)
    return subprocess.run([TC, *args], cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def exec_leg(tree: Path, work: Path, out: str, state: str, *more: str) -> subprocess.CompletedProcess[str]:
    proc = tc("exec", "--config", str(tree / "config.yaml"), "--torch-root", str(tree), "--out", out, "-q",
              "--retries", "0", "--state-dir", state, *more, cwd=work)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def instances(folder: Path) -> list[str]:
    return [json.loads(line)["nodeid"] for line in (folder / "results.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def legs(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("legs")
    exec_leg(tree, work, "whole", "whole-state")  # the unsharded run, in a state dir of its own
    for k in (1, 2, 3):  # one after another, ONE state dir: each leg records new durations
        exec_leg(tree, work, f"leg{k}", "state", "--shard", f"{k}/3")
    return work


@pytest.mark.slow
def test_legs_run_one_after_another_in_one_state_dir_partition_exactly(legs: Path) -> None:
    whole = instances(legs / "whole")
    parts = [instances(legs / f"leg{k}") for k in (1, 2, 3)]
    ran = [n for part in parts for n in part]
    assert len(whole) == 17 and all(parts)
    assert sorted(ran) == sorted(whole), {  # every instance exactly once, none dropped
        "twice": sorted({n for n in ran if ran.count(n) > 1}), "never": sorted(set(whole) - set(ran))}


def test_every_leg_split_by_one_frozen_snapshot(legs: Path) -> None:
    snapshots = list((legs / "state" / "shard-snapshots").glob("*.json"))
    assert len(snapshots) == 1  # taken by leg 1, read by legs 2 and 3
    plans = [json.loads((legs / f"leg{k}" / "manifest.json").read_text())["shard_plan"] for k in (1, 2, 3)]
    assert len({p["durations_sha256"] for p in plans}) == 1 and len({p["collected_sha256"] for p in plans}) == 1
    assert [p["shard"] for p in plans] == ["1/3", "2/3", "3/3"] and all(p["collected"] == 17 for p in plans)
    for k, plan in zip((1, 2, 3), plans):
        assert sorted(plan["kept"]) == sorted(instances(legs / f"leg{k}"))
    # The legs still recorded what they measured: the next snapshot starts from it.
    assert tc("durations", "export", "--state-dir", "state", "--out", "d.json", cwd=legs).returncode == 0
    assert len(json.loads((legs / "d.json").read_text())) == 15  # the 2 config skips are not recorded


def test_a_merge_of_the_legs_is_the_unsharded_run(legs: Path) -> None:
    proc = tc("refine", "--results", *(str(legs / f"leg{k}") for k in (1, 2, 3)), "--out", "merged", cwd=legs)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(instances(legs / "merged")) == sorted(instances(legs / "whole"))


def test_a_merge_that_misses_a_leg_exits_3_naming_what_is_missing(legs: Path) -> None:
    proc = tc("refine", "--results", str(legs / "leg1"), str(legs / "leg2"), "--out", "partial", cwd=legs)
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-3000:]
    missing = sorted(instances(legs / "leg3"))
    assert f"in no shard ({len(missing)})" in proc.stderr and missing[0] in proc.stderr
    assert "no results from shard(s) 3/3" in proc.stderr
    assert not (legs / "partial" / "results.jsonl").exists()  # a merge that does not partition writes nothing


@pytest.mark.slow
def test_a_merge_of_overlapping_legs_exits_3_naming_the_overlap(tree: Path, legs: Path) -> None:
    # Leg 2 again, split by other durations: one test said to take 100 s, the rest 10 ms.
    skewed = legs / "skewed.json"
    known = dict.fromkeys(instances(legs / "whole"), 0.01)
    skewed.write_text(json.dumps(known | {"test_dev.py::TestShardMeCPU::test_view_cpu": 100.0}))
    exec_leg(tree, legs, "leg2-skewed", "skewed-state", "--shard", "2/3", "--durations", str(skewed))
    proc = tc("refine", "--results", str(legs / "leg1"), str(legs / "leg2-skewed"), str(legs / "leg3"), "--out", "bad",
              cwd=legs)
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-3000:]
    kept = [set(instances(legs / name)) for name in ("leg1", "leg2-skewed", "leg3")]
    twice = sorted((kept[0] & kept[1]) | (kept[1] & kept[2]))
    never = sorted(set(instances(legs / "whole")) - kept[0] - kept[1] - kept[2])
    assert twice and f"in more than one shard ({len(twice)})" in proc.stderr and twice[0] in proc.stderr
    assert not never or (f"in no shard ({len(never)})" in proc.stderr and never[0] in proc.stderr)
    assert "different durations" in proc.stderr
