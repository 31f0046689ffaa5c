# Example upstream-style test file for testcurator, written in PyTorch's test conventions
# (plain common_utils.TestCase classes, instantiate_parametrized_tests, run_tests).
# Not copied from PyTorch.
#
# Two tests here FAIL on a CPU-only machine on purpose; they are the example config's
# xfail material, the way upstream keeps tests that fail on some platforms and gates them
# elsewhere (upstream would use expectedFailure or a skip decorator; this tree leaves them
# undecorated so that the config, not the source, decides their outcome):
#   TestTensorOrdering::test_sort_complex - CPU has no complex sort kernel
#       ("Sort does not support complex dtypes on CPU"): fails on every CPU run.
#   TestTensorMemory::test_pin_memory - pinning needs an accelerator's host allocator
#       ("Cannot access accelerator device when none is available"): fails on CPU-only
#       machines, passes where CUDA (or another accelerator) is present.
from __future__ import annotations

import torch
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
    subtest,
    TestCase,
)


class TestTensorCreation(TestCase):
    def test_zeros_ones(self):
        self.assertEqual(torch.zeros(2, 3).sum().item(), 0)
        self.assertEqual(torch.ones(2, 3).sum().item(), 6)

    def test_arange(self):
        self.assertEqual(torch.arange(0, 1, 0.25), torch.tensor([0.0, 0.25, 0.5, 0.75]))
        self.assertEqual(torch.arange(5).dtype, torch.int64)

    def test_full_like(self):
        t = torch.empty(2, 2, dtype=torch.float64)
        f = torch.full_like(t, 3.5)
        self.assertEqual(f.dtype, torch.float64)
        self.assertEqual(f, torch.tensor([[3.5, 3.5], [3.5, 3.5]], dtype=torch.float64))

    def test_empty_strided(self):
        t = torch.empty_strided((2, 3), (1, 2))
        self.assertEqual(t.stride(), (1, 2))
        self.assertFalse(t.is_contiguous())

    def test_from_list(self):
        t = torch.tensor([[1, 2], [3, 4]])
        self.assertEqual(t.shape, (2, 2))
        self.assertEqual(t.tolist(), [[1, 2], [3, 4]])

    def test_eye(self):
        e = torch.eye(3)
        self.assertEqual(e.diagonal(), torch.ones(3))
        self.assertEqual(e.sum().item(), 3)


class TestTensorArithmetic(TestCase):
    @parametrize("scalar", [0, 1, -2.5])
    def test_add_scalar(self, scalar):
        t = torch.arange(4, dtype=torch.float32)
        self.assertEqual(t + scalar, torch.tensor([i + scalar for i in range(4)], dtype=torch.float32))

    @parametrize("exponent", [0, 1, 2, 0.5])
    def test_pow(self, exponent):
        t = torch.tensor([1.0, 4.0, 9.0])
        self.assertEqual(t.pow(exponent), torch.tensor([v**exponent for v in (1.0, 4.0, 9.0)]))

    @parametrize(
        "pair",
        [
            subtest((torch.int64, torch.float32), name="int64_float32"),
            subtest((torch.bool, torch.int32), name="bool_int32"),
            subtest((torch.float16, torch.float64), name="float16_float64"),
        ],
    )
    def test_type_promotion(self, pair):
        a, b = (torch.ones(2, dtype=d) for d in pair)
        self.assertEqual((a + b).dtype, torch.promote_types(*pair))

    def test_integer_division_rounds_toward_floor(self):
        t = torch.tensor([-7, 7])
        self.assertEqual(t // 2, torch.tensor([-4, 3]))
        self.assertEqual(torch.div(t, 2, rounding_mode="trunc"), torch.tensor([-3, 3]))


class TestTensorOrdering(TestCase):
    def test_sort_real(self):
        values, indices = torch.sort(torch.tensor([3.0, 1.0, 2.0]))
        self.assertEqual(values, torch.tensor([1.0, 2.0, 3.0]))
        self.assertEqual(indices, torch.tensor([1, 2, 0]))

    def test_argsort_stable(self):
        t = torch.tensor([1, 0, 1, 0])
        self.assertEqual(torch.argsort(t, stable=True), torch.tensor([1, 3, 0, 2]))

    def test_topk(self):
        values, _ = torch.topk(torch.tensor([5, 1, 4, 2]), 2)
        self.assertEqual(values, torch.tensor([5, 4]))

    # Fails on CPU: no complex sort kernel (xfail material, see the header).
    def test_sort_complex(self):
        t = torch.tensor([2 + 1j, 1 + 5j, 1 + 2j], dtype=torch.complex64)
        values, _ = torch.sort(t)
        # Lexicographic order: real part first, then imaginary part.
        self.assertEqual(values, torch.tensor([1 + 2j, 1 + 5j, 2 + 1j], dtype=torch.complex64))


class TestTensorMemory(TestCase):
    def test_clone_independent(self):
        t = torch.zeros(3)
        c = t.clone()
        c.add_(1)
        self.assertEqual(t, torch.zeros(3))
        self.assertNotEqual(c.data_ptr(), t.data_ptr())

    def test_share_memory(self):
        t = torch.zeros(4).share_memory_()
        self.assertTrue(t.is_shared())

    # Fails on CPU-only machines: pinning needs an accelerator (xfail material).
    def test_pin_memory(self):
        t = torch.arange(4.0)
        pinned = t.pin_memory()
        self.assertTrue(pinned.is_pinned())
        self.assertEqual(pinned, t)


instantiate_parametrized_tests(TestTensorArithmetic)


def test_default_dtype_is_float32():
    # A plain pytest function beside the unittest classes, as some upstream files have.
    assert torch.get_default_dtype() == torch.float32
    assert torch.tensor([1.5]).dtype == torch.float32


if __name__ == "__main__":
    run_tests()
