# Example upstream-style test file for testcurator, written in PyTorch's conventions for
# distributed tests (module-level skip when torch.distributed is unavailable).
# Not copied from PyTorch. Uses in-process stores only: no network, no subprocesses.
from __future__ import annotations

import os
import sys
import tempfile
import unittest
from datetime import timedelta

import torch.distributed as dist
from torch.testing._internal.common_utils import run_tests, TestCase

if not dist.is_available():
    if __name__ == "__main__":
        print("Distributed not available, skipping tests", file=sys.stderr)
        sys.exit(0)
    raise unittest.SkipTest("torch.distributed is not available")


class StoreTestMixin:
    def _create_store(self):
        raise NotImplementedError

    def test_set_get(self):
        store = self._create_store()
        store.set("key", "value")
        self.assertEqual(store.get("key"), b"value")

    def test_add(self):
        store = self._create_store()
        store.add("counter", 2)
        self.assertEqual(store.add("counter", 3), 5)

    def test_compare_set(self):
        store = self._create_store()
        store.set("k", "old")
        self.assertEqual(store.compare_set("k", "old", "new"), b"new")
        self.assertEqual(store.compare_set("k", "old", "other"), b"new")

    def test_wait_timeout(self):
        store = self._create_store()
        store.set_timeout(timedelta(milliseconds=50))
        with self.assertRaises(RuntimeError):
            store.wait(["never_set"])


class TestHashStore(StoreTestMixin, TestCase):
    def _create_store(self):
        return dist.HashStore()


class TestFileStore(StoreTestMixin, TestCase):
    def _create_store(self):
        fd, path = tempfile.mkstemp()
        os.close(fd)
        self.addCleanup(lambda: os.path.exists(path) and os.remove(path))
        return dist.FileStore(path, 1)


if __name__ == "__main__":
    run_tests()
