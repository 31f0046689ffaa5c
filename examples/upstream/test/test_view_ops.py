# Example upstream-style test file for testcurator, written in PyTorch's test conventions
# (device-generic classes, @dtypes, instantiate_device_type_tests). Not copied from PyTorch.
from __future__ import annotations

import numpy as np

import torch
from torch.testing import make_tensor
from torch.testing._internal.common_device_type import (
    dtypes,
    instantiate_device_type_tests,
    onlyCPU,
    onlyCUDA,
    skipMeta,
)
from torch.testing._internal.common_dtype import (
    all_types_and_complex_and,
    floating_types_and,
)
from torch.testing._internal.common_utils import parametrize, run_tests, TestCase


ALL_DTYPES = all_types_and_complex_and(torch.bool, torch.half, torch.bfloat16)


def _random_tensor(shape, device, dtype):
    # Integer and bool inputs come from random_ (aten::random_.from), floating ones from
    # randn: a backend without a random number generator fails the former in setup only.
    if dtype is torch.bool:
        return torch.empty(shape, device=device, dtype=dtype).random_(0, 2)
    if not dtype.is_floating_point and not dtype.is_complex:
        return torch.empty(shape, device=device, dtype=dtype).random_(0, 10)
    return torch.randn(shape, device=device, dtype=dtype)


class TestViewOps(TestCase):
    """Views must alias their base: same storage, no copy."""

    def _assert_is_view_of(self, base, view):
        self.assertTrue(view._is_view())
        self.assertIs(view._base, base)
        self.assertEqual(
            view.untyped_storage().data_ptr(), base.untyped_storage().data_ptr()
        )

    def test_contiguous_self(self, device):
        t = torch.ones(4, 4, device=device)
        self.assertIs(t.contiguous(), t)

    def test_contiguous_nonview(self, device):
        t = torch.arange(12, device=device).view(3, 4).t()
        c = t.contiguous()
        self.assertTrue(c.is_contiguous())
        self.assertFalse(c._is_view())
        self.assertEqual(c, t)

    @dtypes(*ALL_DTYPES)
    def test_transpose_view(self, device, dtype):
        t = make_tensor((3, 5), device=device, dtype=dtype)
        v = t.transpose(0, 1)
        self._assert_is_view_of(t, v)
        self.assertEqual(v.shape, (5, 3))
        self.assertEqual(v[2, 1], t[1, 2])

    @dtypes(torch.complex64, torch.complex128)
    def test_view_as_real(self, device, dtype):
        t = make_tensor((4,), device=device, dtype=dtype)
        r = torch.view_as_real(t)
        self._assert_is_view_of(t, r)
        self.assertEqual(r[:, 0], t.real)
        self.assertEqual(r[:, 1], t.imag)

    def test_view_as_complex(self, device):
        t = torch.randn(3, 2, device=device)
        c = torch.view_as_complex(t)
        self.assertEqual(c.real, t[:, 0])
        c.imag.zero_()
        self.assertEqual(t[:, 1], torch.zeros(3, device=device))

    @parametrize("dim", [0, 1])
    @dtypes(torch.float32, torch.int64)
    def test_unfold_view(self, device, dtype, dim):
        t = make_tensor((4, 4), device=device, dtype=dtype)
        u = t.unfold(dim, 2, 2)
        self._assert_is_view_of(t, u)
        self.assertEqual(u.shape[dim], 2)

    @parametrize("offset", [-1, 0, 1])
    @dtypes(torch.float32)
    def test_diagonal_view(self, device, dtype, offset):
        t = make_tensor((4, 4), device=device, dtype=dtype)
        d = t.diagonal(offset)
        self._assert_is_view_of(t, d)
        d.fill_(7)
        self.assertEqual(torch.diagonal(t, offset), torch.full_like(d, 7))

    @onlyCPU
    def test_storage_error(self, device):
        # Storage borrowed from numpy cannot grow: resizing must raise, not reallocate.
        t = torch.from_numpy(np.zeros(3))
        with self.assertRaisesRegex(RuntimeError, "not resizable"):
            t.resize_(10)

    def test_storage_error_no_attribute(self, device):
        s = torch.empty(2, device=device).untyped_storage()
        with self.assertRaises(AttributeError):
            s.no_such_attribute  # noqa: B018

    @skipMeta
    @dtypes(torch.float32, torch.float64)
    def test_view_data_ptr_shared(self, device, dtype):
        # Meta tensors have no data, so data_ptr comparisons are meaningless there.
        t = make_tensor((2, 6), device=device, dtype=dtype)
        v = t.view(3, 4)
        self.assertEqual(v.data_ptr(), t.data_ptr())
        v[0, 0] = 5
        self.assertEqual(t[0, 0].item(), 5)

    @dtypes(torch.complex64, torch.complex128)
    def test_conj_view_det(self, device, dtype):
        # conj() is a lazy view (conj bit); linalg must honour it: det(conj(A)) == conj(det(A)).
        a = make_tensor((3, 3), device=device, dtype=dtype)
        c = a.conj()
        self.assertTrue(c.is_conj())
        self.assertEqual(torch.linalg.det(c), torch.linalg.det(a).conj())

    def test_view_dtype_reinterpret(self, device):
        t = torch.tensor([1.0, -2.0], device=device)
        bits = t.view(torch.int32)
        self.assertEqual(bits.view(torch.float32), t)
        self.assertEqual(bits[0].item(), 0x3F800000)

    @onlyCUDA
    def test_view_across_streams(self, device):
        stream = torch.cuda.Stream()
        t = torch.arange(8, device=device)
        with torch.cuda.stream(stream):
            v = t.view(2, 4)
            v.add_(1)
        torch.cuda.synchronize()
        self.assertEqual(t, torch.arange(1, 9, device=device))


class TestOldViewOps(TestCase):
    """Shape manipulation: broadcasting, reshaping, splitting."""

    @dtypes(torch.float32, torch.float64, torch.int64)
    def test_broadcast_tensors(self, device, dtype):
        a = make_tensor((2, 1), device=device, dtype=dtype)
        b = make_tensor((1, 3), device=device, dtype=dtype)
        x, y = torch.broadcast_tensors(a, b)
        self.assertEqual(x.shape, (2, 3))
        self.assertEqual(y.shape, (2, 3))
        self.assertEqual(x[:, 2], a[:, 0])
        self.assertEqual(x.stride(), (1, 0))

    @dtypes(
        torch.bool, torch.uint8, torch.int32, torch.int64,
        torch.float32, torch.float64, torch.complex64,
    )
    def test_broadcast_to(self, device, dtype):
        t = _random_tensor((3, 1), device, dtype)
        b = torch.broadcast_to(t, (2, 3, 4))
        self.assertEqual(b.shape, (2, 3, 4))
        self.assertEqual(b, t.expand(2, 3, 4))
        with self.assertRaisesRegex(RuntimeError, "must match"):
            torch.broadcast_to(t, (3, 2, 4)[1:])

    @dtypes(*ALL_DTYPES)
    def test_expand(self, device, dtype):
        t = make_tensor((1, 3), device=device, dtype=dtype)
        e = t.expand(4, 3)
        self.assertEqual(e.stride(), (0, 1))
        self.assertEqual(e[3], t[0])

    def test_reshape_view_semantics(self, device):
        t = torch.arange(6, device=device)
        self.assertEqual(t.reshape(2, 3).data_ptr(), t.data_ptr())
        nc = t.view(2, 3).t()
        # reshape of a non-contiguous tensor must copy, and say so by not aliasing.
        r = nc.reshape(6)
        self.assertNotEqual(r.data_ptr(), t.data_ptr())
        self.assertEqual(r, torch.tensor([0, 3, 1, 4, 2, 5], device=device))

    @dtypes(*floating_types_and(torch.half, torch.bfloat16))
    def test_flatten(self, device, dtype):
        t = make_tensor((2, 3, 4), device=device, dtype=dtype)
        self.assertEqual(t.flatten().shape, (24,))
        self.assertEqual(t.flatten(1).shape, (2, 12))
        self.assertEqual(t.flatten(0, 1), t.view(6, 4))

    @parametrize("dim", [0, -1])
    def test_squeeze_unsqueeze(self, device, dim):
        t = torch.randn(3, 4, device=device)
        u = t.unsqueeze(dim)
        self.assertEqual(u.dim(), 3)
        self.assertEqual(u.squeeze(dim), t)

    def test_chunk_split_views(self, device):
        t = torch.arange(10, device=device)
        chunks = t.chunk(3)
        self.assertEqual([c.numel() for c in chunks], [4, 4, 2])
        for c in t.split(4):
            self.assertIs(c._base, t)

    @dtypes(*ALL_DTYPES)
    def test_narrow_view(self, device, dtype):
        t = make_tensor((5, 4), device=device, dtype=dtype)
        n = t.narrow(0, 1, 3)
        self.assertIs(n._base, t)
        self.assertEqual(n, t[1:4])

    @dtypes(*ALL_DTYPES)
    def test_select_view(self, device, dtype):
        t = make_tensor((3, 4), device=device, dtype=dtype)
        s = t.select(1, 2)
        self.assertIs(s._base, t)
        self.assertEqual(s, t[:, 2])

    @dtypes(*ALL_DTYPES)
    def test_unsqueeze_view(self, device, dtype):
        t = make_tensor((3,), device=device, dtype=dtype)
        u = t.unsqueeze(0)
        self.assertIs(u._base, t)
        self.assertEqual(u.stride(), (3, 1))

    @dtypes(*ALL_DTYPES)
    def test_as_strided_view(self, device, dtype):
        t = make_tensor((6,), device=device, dtype=dtype)
        s = t.as_strided((2, 2), (3, 1), 1)
        self.assertIs(s._base, t)
        self.assertEqual(s[1, 1], t[5])

    def test_permute_view(self, device):
        t = torch.randn(2, 3, 4, device=device)
        p = t.permute(2, 0, 1)
        self.assertEqual(p.shape, (4, 2, 3))
        self.assertEqual(p.mT.shape, (4, 3, 2))
        self.assertEqual(p[1, 0, 2], t[0, 2, 1])

    @parametrize("sections", [1, 2, 3])
    def test_tensor_split_sections(self, device, sections):
        t = torch.arange(7, device=device)
        parts = torch.tensor_split(t, sections)
        self.assertEqual(len(parts), sections)
        self.assertEqual(torch.cat(parts), t)


instantiate_device_type_tests(TestViewOps, globals())
instantiate_device_type_tests(TestOldViewOps, globals())

if __name__ == "__main__":
    run_tests()
