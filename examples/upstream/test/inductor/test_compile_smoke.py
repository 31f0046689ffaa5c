# Example upstream-style test file for testcurator, written in PyTorch's conventions for
# compiler tests. Not copied from PyTorch. The inductor class needs a GPU with Triton (as
# upstream's GPU inductor tests do) and skips elsewhere; the dynamo class uses the "eager"
# backend, which traces with dynamo but generates no code, so it stays fast on CPU.
from __future__ import annotations

import importlib.util
import unittest

import torch
from torch.testing._internal.common_utils import run_tests, TEST_CUDA, TestCase

HAS_GPU_AND_TRITON = TEST_CUDA and importlib.util.find_spec("triton") is not None


def _pointwise(x, y):
    return (x * y).relu() + 1


class TestDynamoEagerBackend(TestCase):
    def test_compile_matches_eager(self):
        compiled = torch.compile(_pointwise, backend="eager", fullgraph=True)
        x, y = torch.randn(8), torch.randn(8)
        self.assertEqual(compiled(x, y), _pointwise(x, y))

    def test_recompile_on_new_dtype(self):
        compiled = torch.compile(_pointwise, backend="eager")
        a = torch.arange(4.0)
        b = torch.arange(4, dtype=torch.int64)
        self.assertEqual(compiled(a, a), _pointwise(a, a))
        self.assertEqual(compiled(b, b), _pointwise(b, b))


@unittest.skipIf(not HAS_GPU_AND_TRITON, "requires a GPU and triton")
class TestInductorGPU(TestCase):
    def test_pointwise_fusion(self):
        x, y = torch.randn(64, device="cuda"), torch.randn(64, device="cuda")
        compiled = torch.compile(_pointwise)
        self.assertEqual(compiled(x, y), _pointwise(x, y))

    def test_reduction(self):
        x = torch.randn(32, 32, device="cuda")
        compiled = torch.compile(lambda t: t.sum(dim=1).softmax(0))
        self.assertEqual(compiled(x), x.sum(dim=1).softmax(0))


if __name__ == "__main__":
    run_tests()
