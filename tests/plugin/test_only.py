"""--curate-only: only the named tests run, every instance of each, matched by identity."""

from __future__ import annotations


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
    # The device tests not named were never instantiated; only the module-level test is
    # collected to be deselected.
    result.assert_outcomes(passed=len(ran), deselected=int("test_module_level" not in names))
    passed = sorted(line.split("::")[-1].split(" ")[0] for line in result.outlines if " PASSED" in line)
    assert passed == sorted(ran)


def test_a_missing_list_fails_at_parse_time(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--curate-only", "nope.tests")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "test list does not exist: nope.tests" in result.stderr.str()


# Narrowing before instantiation: a parametrized class, class data named like a test, and a
# subclass in another file that inherits a named test.
BASE = """\
from torch.testing._internal.common_utils import TestCase, instantiate_parametrized_tests, parametrize


@instantiate_parametrized_tests
class TestBase(TestCase):
    test_cases = [1, 2]

    @parametrize("n", [1, 2, 3])
    def test_p(self, n):
        self.assertEqual(self.test_cases, [1, 2])

    @parametrize("n", [4, 5])
    def test_q(self, n):
        pass

    def test_plain(self):
        pass
"""
DERIVED = """\
from test_base import TestBase


class TestDerived(TestBase):
    pass
"""


def _collected(result: pytest.RunResult) -> list[str]:
    return sorted(line for line in result.outlines if "::" in line)


@pytest.mark.parametrize(("file", "names", "expected"), [
    ("test_promo.py", ["TestPromo::test_add"], ["TestPromoCPU::test_add_cpu_float32", "TestPromoCPU::test_add_cpu_int64"]),
    ("test_base.py", ["TestBase::test_p"], ["TestBase::test_p_n_1", "TestBase::test_p_n_2", "TestBase::test_p_n_3"]),
    ("test_derived.py", ["TestDerived::test_p", "TestDerived::test_plain"],
     ["TestDerived::test_p_n_1", "TestDerived::test_p_n_2", "TestDerived::test_p_n_3", "TestDerived::test_plain"]),
])
def test_named_tests_collect_as_without_narrowing(pytester: pytest.Pytester, file: str, names: list[str],
                                                  expected: list[str]) -> None:
    pytester.makepyfile(test_promo=PROMO, test_base=BASE, test_derived=DERIVED)
    pytester.syspathinsert()
    keys = write_keys(pytester.path / "only.tests", [TestKey.of(file, n) for n in names], pytester.path)
    everything = _collected(pytester.runpytest_inprocess("-p", "no:cacheprovider", "--collect-only", "-q", file))
    named = [f"{file}::{e}" for e in expected]
    assert set(named) < set(everything)  # the same ids as a full collection makes, and fewer
    narrowed = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--collect-only", "-q", "--curate-only", str(keys), file)
    assert _collected(narrowed) == named
    ran = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--curate-only", str(keys), file, "-v")
    assert sorted(line.split(" ")[0] for line in ran.outlines if " PASSED" in line) == named


# A kept test that builds and instantiates a class of its own when it runs, as upstream
# test_testing's TestTestParametrization does: it must get every function of that class.
SELF_INSTANTIATING = """\
from torch.testing._internal.common_utils import TestCase, instantiate_parametrized_tests, parametrize


class TestNames(TestCase):
    def test_default_names(self):
        class TestInner(TestCase):
            @parametrize("x", range(3))
            def test_default_names(self, x):
                pass

            @parametrize("x", range(2))
            def test_two_things(self, x):
                pass

        instantiate_parametrized_tests(TestInner)
        self.assertEqual(len([n for n in vars(TestInner) if n.startswith("test_")]), 5)

    def test_other(self):
        pass
"""


def test_a_test_instantiating_at_run_time_is_not_narrowed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_names=SELF_INSTANTIATING)
    keys = write_keys(pytester.path / "only.tests", [TestKey.of("test_names.py", "TestNames::test_default_names")],
                      pytester.path)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--curate-only", str(keys), "-v")
    # Narrowed at run time, the inner class kept test_default_names' 3 of its 5 tests.
    result.assert_outcomes(passed=1)


def test_narrowing_ends_with_the_session(pytester: pytest.Pytester) -> None:
    from torch.testing._internal import common_device_type, common_utils

    before = (common_device_type.instantiate_device_type_tests, common_utils.instantiate_parametrized_tests)
    run(pytester, ["TestPromo::test_add"]).assert_outcomes(passed=2, deselected=1)
    assert (common_device_type.instantiate_device_type_tests, common_utils.instantiate_parametrized_tests) == before


def test_a_config_entry_not_named_is_not_stale(pytester: pytest.Pytester) -> None:
    """Unnamed tests are not instantiated; the config's entries for them are not stale."""
    pytester.makepyfile(test_promo=PROMO)
    config = pytester.path / "curate.yaml"
    config.write_text("test_suite_config:\n  files:\n    - path: test_promo.py\n      tests:\n"
                      "        - names: [TestPromo::test_add, TestPromo::test_add_inplace]\n"
                      "          mode: mandatory_success\n        - names: [TestPromo::test_gone]\n          mode: skip\n")
    keys = write_keys(pytester.path / "only.tests", [TestKey.of("test_promo.py", n) for n in
                                                     ("TestPromo::test_add", "TestPromo::test_gone")], pytester.path)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--curate-config", str(config),
                                          "--curate-torch-root", str(pytester.path), "--curate-only", str(keys))
    result.assert_outcomes(passed=2, deselected=1)
    stale = [line for line in result.outlines if "stale" in line.lower()] + [
        line for line in result.outlines if "TestPromo::test_" in line and "stale" not in line.lower()]
    assert any("TestPromo::test_gone" in line for line in stale)  # named, and not in the tree: stale
    assert not any("test_add_inplace" in line for line in stale)


# Classes none of whose tests is named are not collected at all (not even to be deselected):
# a PyTorch TestCase class costs a scan of its inherited attributes at collection.
CLASSES = """\
from torch.testing._internal.common_utils import TestCase


class TestKept(TestCase):
    def test_a(self):
        pass

    def test_b(self):
        pass


class TestOther(TestCase):
    def test_a(self):
        pass


class TestPlain:
    def test_c(self):
        pass
"""


@pytest.mark.parametrize(("names", "passed", "deselected"), [
    (["TestKept::test_a"], ["TestKept::test_a"], 1),  # TestKept::test_b; TestOther's test_a is not collected
    (["TestPlain::test_c"], ["TestPlain::test_c"], 0),
    (["TestOther::test_a", "TestKept::test_b"], ["TestKept::test_b", "TestOther::test_a"], 1),
])
def test_classes_with_no_named_test_are_not_collected(pytester: pytest.Pytester, names: list[str],
                                                      passed: list[str], deselected: int) -> None:
    pytester.makepyfile(test_classes=CLASSES)
    keys = write_keys(pytester.path / "only.tests", [TestKey.of("test_classes.py", n) for n in names], pytester.path)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--curate-only", str(keys), "-v")
    result.assert_outcomes(passed=len(passed), deselected=deselected)
    assert sorted(line.split(" ")[0] for line in result.outlines if " PASSED" in line) == [
        f"test_classes.py::{p}" for p in passed]
