"""Reruns select by identity, not by node id: on a privateuse1 backend a test's class name
depends on what its process instantiated before it (OpenReg: ``TestFooPRIVATEUSE1`` in one
process, ``TestFooOPENREG`` in another). A reproduction with the example backend, registered
by the tree's own conftest.py as torch_openreg registers itself: PyTorch's test base is left
unnamed, so the first class a process instantiates is ``...PRIVATEUSE1``, later ones
``...CURATEDEV``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from testcurator.runner.command import RunSpec
from testcurator.runner.execute import execute
from testcurator.vocab import instance_key

BACKEND_DIR = Path(__file__).resolve().parents[2] / "examples" / "backend"
QUIET_PLUGINS = ("-p", "no:langsmith_plugin", "-p", "no:hypothesispytest", "-p", "no:anyio")

CONFTEST = """
import sys
sys.path.insert(0, {backend!r})
import curatedev  # noqa: F401  registers the device; PyTorch's privateuse1 test base keeps its name
"""

FIRST = """
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase


class TestAlpha(TestCase):
    def test_ok(self, device):
        pass


instantiate_device_type_tests(TestAlpha, globals())
"""

SECOND = """
import os

from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase


class TestBeta(TestCase):
    def test_a_abort(self, device):
        os.abort()

    def test_b_fails(self, device):
        self.assertEqual(1, 2)

    def test_c_after(self, device):
        pass


instantiate_device_type_tests(TestBeta, globals())
"""


def _tree(root: Path, *, conftest: bool) -> Path:
    root.mkdir()
    (root / "test_first.py").write_text(textwrap.dedent(FIRST))
    (root / "test_second.py").write_text(textwrap.dedent(SECOND))
    if conftest:
        (root / "conftest.py").write_text(CONFTEST.format(backend=str(BACKEND_DIR)))
    return root


@pytest.mark.parametrize(("key", "generic", "expected"), [
    ("t.py::TestFooPRIVATEUSE1::test_x_openreg_float32", "TestFoo::test_x", "t.py::TestFoo::test_x_openreg_float32"),
    ("t.py::TestFooOPENREG::test_x_openreg_float32", "TestFoo::test_x", "t.py::TestFoo::test_x_openreg_float32"),
    ("t.py::test_plain[1-2]", "test_plain", "t.py::test_plain[1-2]"),
    ("t.py::TestPlain::test_y", None, "t.py::TestPlain::test_y"),
    ("t.py::Outer::TestFooCPU::test_z_cpu", "TestFoo::test_z", "t.py::Outer::TestFoo::test_z_cpu"),
])
def test_instance_key(key: str, generic: str | None, expected: str) -> None:
    assert instance_key(key, generic) == expected


@pytest.mark.slow
def test_reruns_find_tests_whose_class_another_process_named_otherwise(tmp_path: Path) -> None:
    root = _tree(tmp_path / "tree", conftest=True)
    spec = RunSpec(out_dir=tmp_path / "out", paths=(str(root),), rootdir=root, device="curatedev",
                   timeout=120, retries=1, extra_args=QUIET_PLUGINS)
    result = execute(spec)
    got = {r.generic: r for r in result.records}
    # The first process named TestBeta after the backend (TestAlpha took PRIVATEUSE1); the
    # rerun after the abort and the retry of the failure imported test_second.py alone.
    assert got["TestBeta::test_a_abort"].nodeid == "test_second.py::TestBetaCURATEDEV::test_a_abort_curatedev"
    reruns = [inv.argv for inv in result.invocations[1:]]
    assert reruns and all(any(a.startswith("--curate-only=") for a in argv) for argv in reruns)
    outcomes = {g: (r.outcome, r.attempts) for g, r in got.items()}
    assert outcomes == {
        "TestAlpha::test_ok": ("passed", 1), "TestBeta::test_a_abort": ("crashed", 2),
        "TestBeta::test_b_fails": ("failed", 2), "TestBeta::test_c_after": ("passed", 1),
    }
    assert len(result.records) == 4  # one record per instance, none infrastructure
    # ... under another name: the quirk this reproduces.
    rerun_events = "".join(p.read_text() for p in (tmp_path / "out" / "work").glob("*.events.jsonl")
                           if not p.name.startswith("run-0"))
    assert "TestBetaPRIVATEUSE1::" in rerun_events


@pytest.mark.slow
def test_curate_backend_names_every_class_after_the_backend(tmp_path: Path) -> None:
    root = _tree(tmp_path / "tree", conftest=False)
    spec = RunSpec(out_dir=tmp_path / "out", paths=(str(root / "test_second.py"), str(root / "test_first.py")),
                   rootdir=root, device="curatedev", backend=str(BACKEND_DIR / "curatedev"), timeout=120,
                   retries=0, extra_args=QUIET_PLUGINS)
    nodeids = [r.nodeid for r in execute(spec).records]
    assert len(nodeids) == 4
    assert all("CURATEDEV::" in n for n in nodeids), nodeids
