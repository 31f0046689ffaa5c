"""The memory stage's capture on a real device (the example backend, curatedev): what the device
does not instantiate and what is skipped upstream is not run, one dtype per family is, the
others are projected, and a warm run captures nothing that did not change."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from testcurator.memory import capture_run, stage
from testcurator.memory.capture_run import DEFAULT_INSTANCE_S
from testcurator.memory.capture_select import NOT_ON_DEVICE, SAME_KIND, SKIPPED_UPSTREAM
from testcurator.memory.evidence import read_evidence
from testcurator.runner.shards.executors import LocalExecutor
from testcurator.vocab import TestKey

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "backend"
SOURCE = '''\
import unittest

import torch
from torch.testing._internal.common_utils import TestCase, run_tests
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests


class TestEverywhere(TestCase):
    @dtypes(torch.float32, torch.float64, torch.int32, torch.int64)
    def test_add(self, device, dtype):
        x = torch.ones(3, device=device, dtype=dtype)
        self.assertEqual((x + x).sum().item(), 6)

    @unittest.skip("broken upstream")
    def test_skipped(self, device):
        raise AssertionError("never runs")


class TestReferenceOnly(TestCase):
    @dtypes(torch.float32, torch.float64)
    def test_mul(self, device, dtype):
        self.assertEqual((torch.ones(2, device=device, dtype=dtype) * 2).sum().item(), 4)


instantiate_device_type_tests(TestEverywhere, globals())
instantiate_device_type_tests(TestReferenceOnly, globals(), only_for=("cpu", "cuda"))

if __name__ == "__main__":
    run_tests()
'''
FILE = "test/test_capture_pick.py"


def _memory(tree: Path, state: Path, work: Path, budget_s: float | None = None) -> dict:
    work.mkdir(parents=True)
    device = stage.DeviceTarget("curatedev", "curatedev.testing:setup_device_type_tests",
                                (("PYTHONPATH", str(EXAMPLE)),))
    return stage.run_memory_stage(tree, [FILE], state_dir=state, work=work, embed=False, say=print,
                                  capture=stage.CaptureRun(LocalExecutor(), device=device, budget_s=budget_s))


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    (tree / "test").mkdir(parents=True)
    (tree / FILE).write_text(SOURCE, encoding="utf-8")
    (tree / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    return tree


@pytest.mark.slow
def test_the_capture_runs_what_can_matter_and_projects_the_rest(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    state = tmp_path / "state"
    capture = _memory(tree, state, tmp_path / "run1")["capture"]
    # 4 test_add + 1 test_skipped + 2 test_mul CPU instances; test_add's float32 and int32 run
    assert (capture["instances"], capture["kept"]) == (7, 2)
    assert capture["left_out"] == {NOT_ON_DEVICE: 2, SAME_KIND: 2, SKIPPED_UPSTREAM: 1}
    assert (capture["projected"], capture["files_captured"], capture["files_reused"]) == (2, 1, 0)

    evidence = read_evidence(tmp_path / "run1" / stage.EVIDENCE)
    add = evidence[TestKey.of(FILE, "TestEverywhere::test_add")]
    # only what ran has a CPU outcome; the projected float64/int64 instances add their dtypes' calls
    assert sorted(n.rpartition("_")[2] for n in add.cpu) == ["float32", "int32"]
    assert set(add.cpu.values()) == {"passed"} and "aten::add.Tensor" in add.aten
    assert len(add.instances) == 4
    mul = evidence[TestKey.of(FILE, "TestReferenceOnly::test_mul")]
    assert mul.cpu == {} and mul.aten == ()  # collected on CPU, never captured

    warm = _memory(tree, state, tmp_path / "run2")["capture"]
    assert (warm["files_captured"], warm["files_reused"], warm["kept"]) == (0, 1, 2)
    assert read_evidence(tmp_path / "run2" / stage.EVIDENCE)[TestKey.of(FILE, "TestEverywhere::test_add")] == add


@pytest.mark.slow
def test_a_budgeted_capture_reruns_nothing_when_nothing_changed(tmp_path: Path) -> None:
    # A budget for one instance at the fixed estimate: the first run times what it captured, and
    # the second must buy the same instance with the same budget (learned times bought others,
    # which changed the file's cache key and captured again).
    tree, state = _tree(tmp_path), tmp_path / "state"
    figures = [_memory(tree, state, tmp_path / run, DEFAULT_INSTANCE_S * 1.5)["capture"] for run in ("run1", "run2")]
    assert [(f["kept"], f["files_captured"], f["files_reused"]) for f in figures] == [(1, 1, 0), (1, 0, 1)]
    assert figures[0]["left_out"] == figures[1]["left_out"]


SINGLE = '''\
import torch
from torch.testing._internal.common_utils import TestCase, run_tests


class TestSingle(TestCase):
    def test_one(self):
        self.assertEqual(torch.ones(1).item(), 1)


if __name__ == "__main__":
    run_tests()
'''


@pytest.mark.slow
def test_a_first_capture_runs_the_file_with_the_fewest_kept_instances_first(tmp_path: Path) -> None:
    # No durations known yet: test_zz_single.py (1 kept instance) runs before
    # test_capture_pick.py (2), although the order given is the other way round.
    tree = _tree(tmp_path)
    (tree / "test" / "test_zz_single.py").write_text(SINGLE, encoding="utf-8")
    (tmp_path / "run1").mkdir()
    device = stage.DeviceTarget("curatedev", "curatedev.testing:setup_device_type_tests",
                                (("PYTHONPATH", str(EXAMPLE)),))
    figures = stage.run_memory_stage(tree, [FILE, "test/test_zz_single.py"], state_dir=tmp_path / "state",
                                     work=tmp_path / "run1", embed=False, say=print,
                                     capture=stage.CaptureRun(LocalExecutor(), device=device))["capture"]
    assert figures["kept"] == 3
    args = (tmp_path / "run1" / "capture" / "1-of-1" / "targets.args").read_text(encoding="utf-8").split()
    assert args == ["test/test_zz_single.py", FILE]


# A test that does something else while a dispatch mode is active (upstream test_content_store's
# storage hashing and test_load_state_dict's tensor subclasses fail under the capture's mode and
# pass without it), beside a test that fails on CPU whatever the mode.
MODAL = '''\
import torch
from torch.testing._internal.common_utils import TestCase, run_tests
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.utils._python_dispatch import _get_current_dispatch_mode


class TestModal(TestCase):
    @dtypes(torch.float32)
    def test_hash(self, device, dtype):
        x = torch.ones(3, device=device, dtype=dtype)
        self.assertIsNone(_get_current_dispatch_mode(), "hashing needs no mode")
        self.assertEqual(x.sum().item(), 3)

    @dtypes(torch.float32)
    def test_broken(self, device, dtype):
        self.assertEqual(torch.ones(2, device=device, dtype=dtype).sum().item(), 3)


instantiate_device_type_tests(TestModal, globals())

if __name__ == "__main__":
    run_tests()
'''
MODAL_FILE = "test/test_capture_modal.py"


@pytest.mark.slow
def test_a_failure_only_under_the_dispatch_mode_is_not_a_cpu_failure(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    (tree / MODAL_FILE).write_text(MODAL, encoding="utf-8")
    (tmp_path / "run1").mkdir()
    device = stage.DeviceTarget("curatedev", "curatedev.testing:setup_device_type_tests",
                                (("PYTHONPATH", str(EXAMPLE)),))
    figures = stage.run_memory_stage(tree, [MODAL_FILE], state_dir=tmp_path / "state", work=tmp_path / "run1",
                                     embed=False, say=print,
                                     capture=stage.CaptureRun(LocalExecutor(), device=device))["capture"]
    assert figures["mode_failures"] == 1
    evidence = read_evidence(tmp_path / "run1" / stage.EVIDENCE)
    hashed = evidence[TestKey.of(MODAL_FILE, "TestModal::test_hash")]
    assert set(hashed.cpu.values()) == {"passed"}
    assert "aten::ones" in hashed.aten  # the ops are still the mode's, recorded up to where it failed
    broken = evidence[TestKey.of(MODAL_FILE, "TestModal::test_broken")]
    assert set(broken.cpu.values()) == {"failed"}


# A test that kills its process on CPU (the capture's timeout does the same to a gradcheck too
# slow under the dispatch mode: holdout test_modules' float64 instances), last or not.
DYING = '''\
import os

import torch
from torch.testing._internal.common_utils import TestCase, run_tests
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests


class TestDying(TestCase):
    @dtypes(torch.float32)
    def test_a_add(self, device, dtype):
        self.assertEqual((torch.ones(2, device=device, dtype=dtype) * 2).sum().item(), 4)

    @dtypes(torch.float32)
    def test_b_dies(self, device, dtype):
        os._exit(3)
{later}

instantiate_device_type_tests(TestDying, globals())

if __name__ == "__main__":
    run_tests()
'''
LATER = '''
    @dtypes(torch.float32)
    def test_c_after(self, device, dtype):
        self.assertEqual(torch.ones(1, device=device, dtype=dtype).item(), 1)
'''


@pytest.mark.parametrize(("later", "cached"), [("", True), (LATER, False)], ids=["dies last", "dies before another"])
@pytest.mark.slow
def test_a_file_whose_only_missing_instances_killed_their_process_is_cached(tmp_path: Path, later: str,
                                                                            cached: bool) -> None:
    # An instance that killed its process kills it again: captured again every night, it cost
    # the holdout a 1,400 s memory stage a night. A test that never started is still tried again.
    tree, state = _tree(tmp_path), tmp_path / "state"
    (tree / FILE).write_text(DYING.format(later=later), encoding="utf-8")
    figures = [_memory(tree, state, tmp_path / run)["capture"] for run in ("run1", "run2")]
    assert figures[0]["files_captured"] == 1
    assert (figures[1]["files_captured"], figures[1]["files_reused"]) == ((0, 1) if cached else (1, 0))
    ran = read_evidence(tmp_path / "run2" / stage.EVIDENCE)[TestKey.of(FILE, "TestDying::test_a_add")].cpu
    assert list(ran.values()) == ["passed"]


# A test far slower under the dispatch mode than the budget's estimate (upstream test_modules'
# float64 gradchecks: minutes each), then one after it.
SLOW = DYING.format(later=LATER).replace("import os", "import time").replace("os._exit(3)", "time.sleep(600)")


@pytest.mark.slow
def test_a_capture_past_its_limit_is_stopped_and_keeps_what_it_recorded(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # The budget bounds an estimate; the limit bounds the wall. Stopped there, the capture keeps
    # what it recorded, leaves out the instance it never started, and caches the file (a capture
    # stopped every night at its limit would cost its limit every night).
    monkeypatch.setattr(capture_run, "CAPTURE_LIMIT_FLOOR_S", 20.0)
    tree, state = _tree(tmp_path), tmp_path / "state"
    (tree / FILE).write_text(SLOW, encoding="utf-8")
    started = time.monotonic()
    figures = _memory(tree, state, tmp_path / "run1", budget_s=1.0)["capture"]
    assert time.monotonic() - started < 120  # not test_b's 600 s
    assert figures["left_out"]["not run: the capture stopped at its limit (20 s)"] == 1  # test_c
    assert (figures["kept"], figures["files_captured"]) == (2, 1)
    ran = read_evidence(tmp_path / "run1" / stage.EVIDENCE)[TestKey.of(FILE, "TestDying::test_a_add")].cpu
    assert list(ran.values()) == ["passed"]
    assert len(list((state / capture_run.CACHE_DIR).glob("*.jsonl"))) == 1
