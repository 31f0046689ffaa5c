"""--curate-isolate: the tests of the named dtypes run in forked processes; a crash ends one test."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from testcurator.plugin.forks.handles import DIED
from testcurator.runner.command import RunSpec
from testcurator.runner.execute import execute

pytest_plugins = ("pytester",)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks (os.fork), Linux only")

# Our own PyTorch-style file: the float64 instance kills its process, as OpenReg's complex
# conj did; a class fixture set up in the parent, and a test after the crash.
CRASHY = '''\
import os
import signal

import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase


class TestCrashy(TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.seen = os.getpid()

    @dtypes(torch.float32, torch.float64)
    def test_conj(self, device, dtype):
        if dtype == torch.float64:
            os.kill(os.getpid(), signal.SIGSEGV)
        self.assertEqual(torch.ones(2, dtype=dtype).sum().item(), 2)

    @dtypes(torch.float64)
    def test_fails(self, device, dtype):
        self.assertEqual(1, 2, msg="a plain failure in the child")

    def test_after(self, device):
        self.assertTrue(self.seen)


instantiate_device_type_tests(TestCrashy, globals(), only_for="cpu")
'''

QUIET = ("-p", "no:cacheprovider", "-p", "no:langsmith_plugin", "-p", "no:hypothesispytest", "-p", "no:anyio")


def test_a_crash_in_an_isolated_test_ends_that_test_only(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_crashy=CRASHY)
    result = pytester.runpytest_subprocess(*QUIET, "--curate-isolate=float64", "-rf")
    result.assert_outcomes(passed=2, failed=2)
    out = result.stdout.str()
    assert f"{DIED} (signal SIGSEGV) while running test_crashy.py::TestCrashyCPU::test_conj_cpu_float64" in out
    assert "a plain failure in the child" in out  # a failure in a child is reported as itself


def test_without_the_option_the_crash_takes_the_process(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_crashy=CRASHY)
    result = pytester.runpytest_subprocess(*QUIET)
    assert result.ret not in (0, 1)  # killed by the signal: no test after it ran
    assert "passed" not in result.stdout.str().splitlines()[-1]


# (the file's change, the option, the instance it lists, passed, failed, the instance whose crash ends only itself)
LISTED = [
    # test_fails' float64 instance is listed: it runs in the process that imported the module
    # (a forked child has a pid of its own); test_conj's float64 is not, and its crash still
    # ends only itself.
    pytest.param((("import os\n", "import os\nIMPORTED_IN = os.getpid()\n"),
                  ('self.assertEqual(1, 2, msg="a plain failure in the child")', "self.assertEqual(os.getpid(), IMPORTED_IN)")),
                 "except", "test_fails|op=|dtype=float64", 3, 1, "test_conj_cpu_float64", id="except"),
    # OpenReg's test_nonzero: its int8 instance crashed, where the probe saw nonzero.out crash
    # in other dtypes only. Here the float32 instance crashes; only float64 is isolated.
    pytest.param((("if dtype == torch.float64:", "if dtype == torch.float32:"),),
                 "also", "test_conj|op=|dtype=float32", 2, 2, "test_conj_cpu_float32", id="also"),
]


@pytest.mark.parametrize(("edits", "option", "listed", "passed", "failed", "crashed"), LISTED)
def test_the_instances_a_list_names_run_in_the_process_or_forked_whatever_their_dtype(
        pytester: pytest.Pytester, edits: tuple[tuple[str, str], ...], option: str, listed: str, passed: int,
        failed: int, crashed: str) -> None:
    source = CRASHY
    for old, new in edits:
        source = source.replace(old, new)
    pytester.makepyfile(test_crashy=source)
    keys = pytester.path / f"{option}.keys"
    keys.write_text(f"test_crashy.py::TestCrashy::{listed}|module=\n")
    result = pytester.runpytest_subprocess(*QUIET, "--curate-isolate=float64", f"--curate-isolate-{option}={keys}", "-rf")
    result.assert_outcomes(passed=passed, failed=failed)
    assert f"{DIED} (signal SIGSEGV) while running test_crashy.py::TestCrashyCPU::{crashed}" in result.stdout.str()


def test_an_except_file_that_is_not_there_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_crashy=CRASHY)
    result = pytester.runpytest_subprocess(*QUIET, "--curate-isolate=float64", "--curate-isolate-except=nowhere.keys")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "instance list does not exist: nowhere.keys" in result.stderr.str()


@pytest.mark.parametrize("value", ["all", "float64,complex128"])
@pytest.mark.slow
def test_isolated_tests_report_every_outcome(pytester: pytest.Pytester, value: str) -> None:
    pytester.makepyfile(test_crashy=CRASHY.replace("os.kill(os.getpid(), signal.SIGSEGV)", "self.skipTest('no')"))
    result = pytester.runpytest_subprocess(*QUIET, f"--curate-isolate={value}", "--junitxml=out.xml")
    result.assert_outcomes(passed=2, failed=1, skipped=1)
    assert 'tests="4"' in (pytester.path / "out.xml").read_text()


# An isolated test forked from a process that ran tests before it inherits what they left
# (OpenReg: the autograd engine's device threads, after which every backward in a forked child
# fails); and the process's own class fixture, set up for the test before, must still be torn
# down before the next class.
ZYGOTE = '''\
import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase

RAN = []


class TestFirst(TestCase):
    @dtypes(torch.float32, torch.float64)
    def test_state(self, device, dtype):
        RAN.append(dtype)
        if dtype == torch.float64:  # isolated: forked from the session as collected
            self.assertEqual(RAN, [torch.float64])


class TestSecond(TestCase):
    def test_next_class(self, device):
        self.assertEqual(RAN, [torch.float32])


instantiate_device_type_tests(TestFirst, globals(), only_for="cpu")
instantiate_device_type_tests(TestSecond, globals(), only_for="cpu")
'''


@pytest.mark.parametrize("workers", [(), ("-n", "1")])
@pytest.mark.slow
def test_an_isolated_test_starts_from_the_session_as_collected(pytester: pytest.Pytester,
                                                               workers: tuple[str, ...]) -> None:
    pytester.makepyfile(test_zygote=ZYGOTE)
    result = pytester.runpytest_subprocess(*QUIET, "--curate-isolate=float64", *workers)
    result.assert_outcomes(passed=3)


# The zygote ends (killed, as the kernel's OOM killer would) while its child runs a test: the
# child dies with it, through no fault of the test's.
ORPHAN = '''\
import os
import signal
from pathlib import Path

import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase

MARK = Path(__file__).with_name("zygote-killed")


class TestOrphan(TestCase):
    @dtypes(torch.float64)
    def test_first(self, device, dtype):
        if not MARK.exists():
            MARK.write_text(str(os.getppid()))
            os.kill(os.getppid(), signal.SIGKILL)  # the zygote; this child dies with it
        self.assertNotEqual(os.getppid(), int(MARK.read_text()))

    @dtypes(torch.float64)
    def test_second(self, device, dtype):
        self.assertNotEqual(os.getppid(), int(MARK.read_text()))


instantiate_device_type_tests(TestOrphan, globals(), only_for="cpu")
'''


def test_a_test_whose_zygote_ended_under_it_runs_again_forked_from_the_process(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_orphan=ORPHAN)
    result = pytester.runpytest_subprocess(*QUIET, "--curate-isolate=float64", "-rf")
    result.assert_outcomes(passed=2)
    assert DIED not in result.stdout.str()
    assert (pytester.path / "zygote-killed").exists()


@pytest.mark.slow
def test_the_runner_records_a_crash_and_runs_the_rest_in_the_same_process(tmp_path: Path) -> None:
    (tmp_path / "test_crashy.py").write_text(CRASHY)
    spec = RunSpec(out_dir=tmp_path / "out", paths=(str(tmp_path / "test_crashy.py"),), rootdir=tmp_path,
                   workers=2, retries=0, isolate=frozenset({"float64"}), extra_args=QUIET[2:])
    result = execute(spec)
    got = {r.nodeid.rsplit("::", 1)[1]: (r.outcome, r.failure_class) for r in result.records}
    assert got == {"test_conj_cpu_float32": ("passed", None), "test_conj_cpu_float64": ("crashed", "crash"),
                   "test_fails_cpu_float64": ("failed", got["test_fails_cpu_float64"][1]),
                   "test_after_cpu": ("passed", None)}
    crash = next(r for r in result.records if r.outcome == "crashed")
    assert "Segmentation fault" in crash.evidence  # the child's faulthandler, as a worker's
    assert len(result.invocations) == 1  # no worker died: no second pytest for the rest


@pytest.mark.slow
def test_an_isolated_test_that_hangs_times_out_alone(tmp_path: Path) -> None:
    (tmp_path / "test_crashy.py").write_text(CRASHY.replace("os.kill(os.getpid(), signal.SIGSEGV)",
                                                            "import time; time.sleep(120)"))
    spec = RunSpec(out_dir=tmp_path / "out", paths=(str(tmp_path / "test_crashy.py"),), rootdir=tmp_path,
                   retries=0, timeout=4, isolate=frozenset({"float64"}), extra_args=QUIET[2:])
    result = execute(spec)
    got = {r.nodeid.rsplit("::", 1)[1]: (r.outcome, r.failure_class) for r in result.records}
    assert got["test_conj_cpu_float64"] == ("timeout", "timeout")
    assert got["test_after_cpu"] == ("passed", None)  # it ran after the hang, in the same process
    assert len(result.invocations) == 1


PARALLEL = """\
import torch

torch.randn(1500, 1500).matmul(torch.randn(1500, 1500))  # the parent's intra-op pool is in use


def test_parallel_op_in_the_child():
    assert torch.randn(1500, 1500).matmul(torch.randn(1500, 1500)).shape == (1500, 1500)
"""


def test_a_child_runs_parallel_ops_after_the_parent_used_its_thread_pool(tmp_path: Path) -> None:
    (tmp_path / "test_parallel.py").write_text(PARALLEL)
    spec = RunSpec(out_dir=tmp_path / "out", paths=(str(tmp_path / "test_parallel.py"),), rootdir=tmp_path,
                   retries=0, timeout=30, isolate=frozenset({"all"}), extra_args=QUIET[2:])
    [record] = execute(spec).records
    assert (record.outcome, record.failure_class) == ("passed", None)  # it hung: its threads were not forked
