# Example upstream-style test file for testcurator, written in PyTorch's test conventions
# for CUDA-only files (class-level TEST_CUDA skip, @onlyCUDA device-generic tests).
# Not copied from PyTorch. On a CPU-only machine every test here is collected and skipped.
from __future__ import annotations

import unittest

import torch
from torch.testing._internal.common_device_type import (
    dtypes,
    instantiate_device_type_tests,
    onlyCUDA,
)
from torch.testing._internal.common_utils import run_tests, TEST_CUDA, TestCase


@unittest.skipIf(not TEST_CUDA, "CUDA not available, skipping tests")
class TestCudaMemory(TestCase):
    def test_memory_allocated_grows(self):
        before = torch.cuda.memory_allocated()
        t = torch.empty(1024, device="cuda")
        self.assertGreater(torch.cuda.memory_allocated(), before)
        del t

    def test_empty_cache(self):
        torch.empty(1024, device="cuda")
        torch.cuda.empty_cache()
        self.assertGreaterEqual(torch.cuda.memory_reserved(), 0)

    def test_stream_synchronize(self):
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            t = torch.ones(8, device="cuda") * 2
        s.synchronize()
        self.assertEqual(t.sum().item(), 16)


class TestCudaDeviceGeneric(TestCase):
    @onlyCUDA
    def test_device_index(self, device):
        t = torch.zeros(2, device=device)
        self.assertEqual(t.device.index, torch.cuda.current_device())

    @onlyCUDA
    @dtypes(torch.float16, torch.float32)
    def test_copy_to_host_non_blocking(self, device, dtype):
        t = torch.arange(6, device=device, dtype=dtype)
        host = t.to("cpu", non_blocking=True)
        torch.cuda.synchronize()
        self.assertEqual(host, torch.arange(6, dtype=dtype))

    @onlyCUDA
    def test_cuda_event_timing(self, device):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.ones(16, device=device).sum()
        end.record()
        end.synchronize()
        self.assertGreaterEqual(start.elapsed_time(end), 0.0)


instantiate_device_type_tests(TestCudaDeviceGeneric, globals())

if __name__ == "__main__":
    run_tests()
