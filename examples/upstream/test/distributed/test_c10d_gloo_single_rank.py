# Example upstream-style test file for testcurator, written in PyTorch's conventions for
# distributed tests. Not copied from PyTorch. A world of one rank over an in-process
# HashStore keeps the collectives real (gloo) without network or extra processes.
from __future__ import annotations

import sys
import unittest

import torch
import torch.distributed as dist
from torch.testing._internal.common_utils import run_tests, TestCase

if not dist.is_available() or not dist.is_gloo_available():
    if __name__ == "__main__":
        print("c10d gloo not available, skipping tests", file=sys.stderr)
        sys.exit(0)
    raise unittest.SkipTest("c10d gloo is not available")


class TestGlooSingleRank(TestCase):
    def setUp(self):
        super().setUp()
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)

    def tearDown(self):
        dist.destroy_process_group()
        super().tearDown()

    def test_all_reduce_sum(self):
        t = torch.arange(4.0)
        dist.all_reduce(t)
        self.assertEqual(t, torch.arange(4.0))

    def test_broadcast(self):
        t = torch.ones(3)
        dist.broadcast(t, src=0)
        self.assertEqual(t, torch.ones(3))

    def test_all_gather(self):
        out = [torch.empty(2)]
        dist.all_gather(out, torch.tensor([1.0, 2.0]))
        self.assertEqual(out[0], torch.tensor([1.0, 2.0]))
        self.assertEqual(dist.get_world_size(), 1)


if __name__ == "__main__":
    run_tests()
