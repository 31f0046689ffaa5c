"""--curate-only: only the named tests run, every instance of each, matched by identity."""

from __future__ import annotations

from pathlib import Path

import pytest

from testcurator.plugin.only import write_keys
from testcurator.vocab import TestKey

pytest_plugins = ("pytester",)

# Our own PyTorch-style file: device-generic tests whose names are prefixes of each other
# (``-k test_add`` keeps ``test_add_inplace`` too), and a module-level test.
PROMO = '''\
import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase


class TestPromo(TestCase):
    @dtypes(torch.float32, torch.int64)
    def test_add(self, device, dtype):
        pass

    @dtypes(torch.float32)
    def test_add_inplace(self, device, dtype):
        pass


instantiate_device_type_tests(TestPromo, globals(), only_for="cpu")


def test_module_level():
    pass
'''


def run(pytester: pytest.Pytester, names: list[str]) -> pytest.RunResult:
    pytester.makepyfile(test_promo=PROMO)
    keys = write_keys(pytester.path / "only.tests", [TestKey.of("test_promo.py", n) for n in names], pytester.path)
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "--curate-only", str(keys), "-v")


@pytest.mark.parametrize(("names", "ran"), [
    # every instance of the named test, not the test whose name it starts
    (["TestPromo::test_add"], ["test_add_cpu_float32", "test_add_cpu_int64"]),
    (["TestPromo::test_add_inplace", "test_module_level"], ["test_add_inplace_cpu_float32", "test_module_level"]),
    ([], []),
])
def test_only_the_named_tests_run(pytester: pytest.Pytester, names: list[str], ran: list[str]) -> None:
    result = run(pytester, names)
    result.assert_outcomes(passed=len(ran), deselected=4 - len(ran))
    passed = sorted(line.split("::")[-1].split(" ")[0] for line in result.outlines if " PASSED" in line)
    assert passed == sorted(ran)


def test_a_missing_list_fails_at_parse_time(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--curate-only", "nope.tests")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "test list does not exist: nope.tests" in result.stderr.str()
