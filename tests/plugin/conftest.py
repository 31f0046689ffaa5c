"""Fixtures: small device-generic test files on the real torch.testing._internal."""

from __future__ import annotations

import textwrap

import pytest

# Our own fixture in PyTorch's style: @dtypes, @ops over a slice of the real op_db,
# @parametrize, a plain TestCase, and the substring trap (test_storage_error[_no_attribute]).
DEVICE_GENERIC = textwrap.dedent(
    '''
    import torch
    from torch.testing._internal.common_utils import TestCase, parametrize, instantiate_parametrized_tests
    from torch.testing._internal.common_device_type import instantiate_device_type_tests, dtypes, ops, onlyCPU
    from torch.testing._internal.common_methods_invocations import op_db

    OPS = [o for o in op_db if o.name in ("add", "sub", "nn.functional.relu") and not o.variant_test_name]

    class TestFoo(TestCase):
        @dtypes(torch.float32, torch.float64, torch.int64)
        def test_bar(self, device, dtype):
            x = torch.ones(3, device=device, dtype=dtype)
            self.assertEqual((x + x).sum().item(), 6)

        @ops(OPS, allowed_dtypes=(torch.float32, torch.float64))
        def test_op(self, device, dtype, op):
            for sample in op.sample_inputs(device, dtype):
                op(sample.input, *sample.args, **sample.kwargs)
                break

        @parametrize("n", [1, 2])
        @dtypes(torch.float32)
        def test_param(self, device, dtype, n):
            self.assertEqual(torch.zeros(n, device=device, dtype=dtype).numel(), n)

        def test_storage_error(self, device):
            self.assertTrue(True)

        def test_storage_error_no_attribute(self, device):
            self.assertTrue(True)

        @onlyCPU
        def test_fails(self, device):
            self.assertEqual(torch.tensor(1.0), torch.tensor(2.0))

    instantiate_device_type_tests(TestFoo, globals(), only_for="cpu")

    class TestPlain(TestCase):
        @parametrize("k", [3, 4])
        def test_q(self, k):
            self.assertGreater(k, 2)

        def test_passes(self):
            pass

    instantiate_parametrized_tests(TestPlain)

    def test_function():
        assert torch.ones(1).item() == 1
    '''
)


@pytest.fixture
def generic_file(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_foo=DEVICE_GENERIC)
    return pytester
