"""Project-wide test setup."""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

# needs.py (what a test needs from the machine; a failure in CI) is a helper module beside
# this file, not an installed package.
sys.path.insert(0, str(Path(__file__).parent))

# No test may reach the network; the embedding model is loaded from its package.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# The example backend's build is cached under ~/.cache; pytester points HOME at each test's
# own folder, so a pytest it starts would compile the extension again (~30 s a test).
os.environ.setdefault("TESTCURATOR_BACKEND_BUILD_DIR", str(Path.home() / ".cache" / "testcurator"))

# pytester's in-process runs drop modules first imported inside them; re-importing
# torch's testing internals (and hypothesis, which they import) in one process segfaults
# during garbage collection. Importing them once here keeps them in the snapshot.
import torch.testing._internal.common_device_type  # noqa: E402,F401
import torch.testing._internal.common_methods_invocations  # noqa: E402,F401
import torch.testing._internal.common_modules  # noqa: E402,F401
import torch.testing._internal.common_utils  # noqa: E402,F401
import torch._dynamo.output_graph  # noqa: E402,F401  (op capture's compile path imports it)


LABELLED_TEST_FILE = """
import torch
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase


class Test{name}(TestCase):
    def test_one(self, device):
        self.assertEqual(torch.ones(1, device=device).item(), 1)

    def test_two(self, device):
        pass


instantiate_device_type_tests(Test{name}, globals(), only_for="cpu")
"""

LABELLED_CONFIG = """\
test_suite_config:
  labels: [nightly]
  unlisted_file_mode: mandatory_success
  files:
    - path: ${TORCH_ROOT}/test_a.py
      labels: [trunk]
      unlisted_test_mode: mandatory_success
    - path: ${TORCH_ROOT}/test_b.py
      unlisted_test_mode: mandatory_success
"""


@pytest.fixture
def write_labelled_tree() -> Callable[[Path], Path]:
    """Writes test_a.py (labels nightly, trunk), test_b.py (nightly), test_c.py (not listed)
    and curate.yaml under a folder; returns the config's path."""

    def write(root: Path) -> Path:
        for name in ("a", "b", "c"):
            (root / f"test_{name}.py").write_text(LABELLED_TEST_FILE.format(name=name.upper()))
        (root / "curate.yaml").write_text(LABELLED_CONFIG)
        return root / "curate.yaml"

    return write


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules with the most ``slow`` tests first, the rest in their order: under
    ``--dist loadfile`` each module goes whole to the next free worker, so the long
    end-to-end modules start at once and the short ones fill the end."""
    slow = Counter(_module(item) for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow[_module(item)])


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]
