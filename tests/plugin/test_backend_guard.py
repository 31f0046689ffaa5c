"""A test that removes the backend's device module (as upstream's test_extension_utils.py
tearDown does) does not take the backend away from the tests after it."""

from __future__ import annotations

from pathlib import Path

import pytest

BACKEND = Path(__file__).resolve().parents[2] / "examples" / "backend" / "curatedev"

UNREGISTERS = """
import sys
import torch
from torch.testing._internal.common_utils import TestCase


class TestExtensionUtils(TestCase):
    def tearDown(self):
        name = torch._C._get_privateuse1_backend_name()
        if hasattr(torch, name):
            delattr(torch, name)
        sys.modules.pop(f"torch.{name}", None)

    def test_register(self):
        self.assertTrue(True)
"""

DEVICE = """
import torch
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase


class TestOnDevice(TestCase):
    def test_sum(self, device):
        self.assertEqual(torch.ones(2, device=device).sum().item(), 2)


instantiate_device_type_tests(TestOnDevice, globals(), only_for=("curatedev",))
"""


@pytest.mark.slow
def test_the_device_module_is_put_back_after_a_test_removes_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a_unregisters=UNREGISTERS, test_b_device=DEVICE)
    result = pytester.runpytest_subprocess("--curate-backend", str(BACKEND), "-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=2)  # without the guard: test_sum errors in setUpClass
    result.stdout.fnmatch_lines(["testcurator: 1 test(s) removed the backend's device module torch.curatedev; *"
                                 "(first: test_a_unregisters.py::TestExtensionUtils::test_register)"])
