"""What a run's CPU op capture need not run (pipelines/capture_rules.py): a test whose source
shows a hook the backend lacks, read as the bucket rules read it."""

from __future__ import annotations

from pathlib import Path

import pytest

from testcurator.agents.brain import BackendContext
from testcurator.memory.builder import build
from testcurator.memory.capture_select import RULED_OUT
from testcurator.pipelines.capture_rules import HookNeeds

SOURCE = '''
import torch
from torch.testing._internal.common_utils import TestCase


class TestX(TestCase):
    def test_compiled(self, device):
        torch.compile(lambda x: x + 1)(torch.ones(1, device=device))

    def test_scripted(self, device):
        torch.jit.script(torch.nn.ReLU()).to(device)

    def test_eager(self, device):
        torch.ones(1, device=device) + 1

    def test_plain_compiled(self):
        torch.compile(lambda x: x + 1)(torch.ones(1))
'''


@pytest.mark.parametrize(("hooks", "test", "reason"), [
    ({"eager_ops"}, "TestX::test_compiled", "the test needs the compile hook"),
    ({"eager_ops", "compile"}, "TestX::test_compiled", None),
    ({"eager_ops"}, "TestX::test_scripted", "the test needs the jit hook"),
    ({"eager_ops"}, "TestX::test_eager", None),
    # Names no device: it runs on CPU on the backend's CI too, so its CPU outcome decides it.
    ({"eager_ops"}, "TestX::test_plain_compiled", None),
])
def test_a_test_whose_source_needs_a_hook_the_backend_lacks_is_ruled_out(
        tmp_path: Path, hooks: set[str], test: str, reason: str | None) -> None:
    root, state = tmp_path / "tree", tmp_path / "state"
    (root / "test").mkdir(parents=True)
    (root / "test" / "test_x.py").write_text(SOURCE, encoding="utf-8")
    build(root, ["test/test_x.py"], state, embed=False)
    backend = BackendContext(name="dev", device="dev", hooks=tuple(sorted(hooks)))
    needs = HookNeeds(root, state, backend, frozenset(hooks))
    assert needs("test/test_x.py", test) == (f"{RULED_OUT}: {reason}" if reason else None)
