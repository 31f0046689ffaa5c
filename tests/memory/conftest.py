"""Small PyTorch-style test files written into tmp_path for the memory tests."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

VIEWS = '''
import torch
import torch.nn.functional as F
from torch.testing._internal.common_utils import TestCase, run_tests, parametrize
from torch.testing._internal.common_device_type import (
    instantiate_device_type_tests, dtypes, onlyCPU)


class _ViewChecks:
    def test_view_shares_storage(self):
        t = torch.arange(6)
        self.assertEqual(t.view(2, 3).data_ptr(), t.data_ptr())


class TestViews(_ViewChecks, TestCase):
    def test_transpose_is_view(self):
        """Transposing returns a view of the same storage."""
        t = torch.ones(2, 3)
        self.assertTrue(t.t()._is_view())


class TestDeviceViews(TestCase):
    @dtypes(torch.float32, torch.float64, torch.int64)
    def test_narrow(self, device, dtype):
        t = torch.zeros(4, device=device, dtype=dtype)
        self.assertEqual(t.narrow(0, 1, 2).numel(), 2)

    @parametrize("dim", [0, 1])
    @dtypes(torch.float32)
    def test_softmax_dim(self, device, dtype, dim):
        x = torch.randn(2, 3, device=device, dtype=dtype)
        self.assertEqual(F.softmax(x, dim=dim).shape, x.shape)

    @onlyCPU
    def test_cpu_only(self, device):
        self.assertEqual(torch.empty(0, device=device).numel(), 0)


instantiate_device_type_tests(TestDeviceViews, globals(), only_for="cpu")

if __name__ == "__main__":
    run_tests()
'''

LINALG = '''
import torch
from torch.testing._internal.common_utils import (
    TestCase, run_tests, parametrize, instantiate_parametrized_tests)


@instantiate_parametrized_tests
class TestMatmul(TestCase):
    @parametrize("n", [1, 2, 3])
    def test_matmul_square(self, n):
        a = torch.eye(n)
        self.assertEqual(torch.matmul(a, a), a)

    def test_det_identity(self):
        """Determinant of the identity matrix is one."""
        self.assertEqual(torch.linalg.det(torch.eye(3)), torch.tensor(1.0))


def test_module_level_cholesky():
    a = torch.eye(2)
    assert torch.linalg.cholesky(a).shape == (2, 2)


if __name__ == "__main__":
    run_tests()
'''


@pytest.fixture
def write_file() -> Callable[[Path, str, str], Path]:
    """write_file(root, relpath, source) -> absolute path (source is dedented)."""

    def write(root: Path, rel: str, source: str) -> Path:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
        return path

    return write


@pytest.fixture
def torch_tree(tmp_path: Path, write_file: Callable[[Path, str, str], Path]) -> Path:
    """A tiny checkout: test/test_views.py and test/linalg/test_linalg_small.py."""
    root = tmp_path / "pytorch"
    write_file(root, "test/test_views.py", VIEWS)
    write_file(root, "test/linalg/test_linalg_small.py", LINALG)
    write_file(root, "test/helpers.py", "def test_not_collected_file():\n    pass\n")
    return root


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"
