"""The verification run retries like ``exec``: a test kept though flaky does not fail it.

Our own device-generic file, in PyTorch's style: one test fails on every odd invocation
(a counter file: the draft's first attempt fails and its retry passes; so do the
verification's), the shape of the order-dependent upstream tests that made a real run's
verification fail while ``exec`` (one retry by default) passed.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLE_BACKEND = Path(__file__).resolve().parents[3] / "examples" / "backend" / "backend.yaml"

FLAKY = '''\
from pathlib import Path

from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase, run_tests

COUNTER = Path({counter!r})


class TestFlaky(TestCase):
    def test_every_other_attempt(self, device):
        n = int(COUNTER.read_text()) if COUNTER.exists() else 0
        COUNTER.write_text(str(n + 1))
        self.assertEqual(n % 2, 1, "fails on its first attempt in every run")

    def test_steady(self, device):
        self.assertTrue(True)


instantiate_device_type_tests(TestFlaky, globals())

if __name__ == "__main__":
    run_tests()
'''


@pytest.mark.parametrize(("retries", "rc", "failures"), [
    ("1", 0, []),  # the default, as exec runs the suite
    ("0", 1, ["test/test_flaky.py::TestFlakyCURATEDEV::test_every_other_attempt_curatedev"]),
])
@pytest.mark.slow
def test_verification_retries_as_exec_does(kit: ModuleType, tmp_path: Path, retries: str, rc: int,
                                           failures: list[str]) -> None:
    tree = tmp_path / "upstream"
    (tree / "test").mkdir(parents=True)
    (tree / "test" / "test_flaky.py").write_text(FLAKY.format(counter=str(tmp_path / "counter")), encoding="utf-8")
    out = tmp_path / "out"
    got = kit.main(["run", "--torch-root", str(tree), "--backend", str(EXAMPLE_BACKEND), "--out", str(out),
                    "--state-dir", str(tmp_path / "state"), "-n", "1", "--no-embed", "--no-capture-ops",
                    "--retries", retries])
    verify = json.loads((out / "report.json").read_text(encoding="utf-8"))["verify"]
    assert (got, verify["mandatory_failures"]) == (rc, failures)
    assert verify["flaky"] == (["test/test_flaky.py::TestFlakyCURATEDEV::test_every_other_attempt_curatedev"]
                               if retries == "1" else [])
