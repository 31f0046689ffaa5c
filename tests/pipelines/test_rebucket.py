"""`testcurator refine --config --results`: real JUnit XML re-buckets a config in place."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testcurator.cli.main import main
from testcurator.config.loader import load_config

UPSTREAM = textwrap.dedent(
    """
    import torch
    from torch.testing._internal.common_utils import TestCase, run_tests
    from torch.testing._internal.common_device_type import instantiate_device_type_tests, dtypes

    class TestReb(TestCase):
        @dtypes(torch.float32, torch.float64)
        def test_ok(self, device, dtype):
            self.assertEqual(torch.ones(2, device=device, dtype=dtype).sum().item(), 2)

        @dtypes(torch.float32, torch.int64)
        def test_int_mean(self, device, dtype):
            torch.ones(3, device=device, dtype=dtype).mean()  # integer mean raises for int64

        def test_mismatch(self, device):
            torch.testing.assert_close(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]))

    instantiate_device_type_tests(TestReb, globals(), only_for="cpu")

    if __name__ == "__main__":
        run_tests()
    """
)

CONFIG = """\
test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test/test_reb.py
      tests:
        # a human note that must stay
        - names: [TestReb::test_ok]
          mode: mandatory_success
        - names: [TestReb::test_int_mean, TestReb::test_mismatch]
          mode: mandatory_success
"""


@pytest.fixture(scope="module")
def refined(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    root = tmp_path_factory.mktemp("reb")
    (root / "test").mkdir()
    (root / "test" / "test_reb.py").write_text(UPSTREAM)
    cfg = root / "curate.yaml"
    cfg.write_text(CONFIG)
    xml = root / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test/test_reb.py",
                    "--curate-config", str(cfg), "--curate-torch-root", str(root), f"--junitxml={xml}"],
                   cwd=root, capture_output=True, text=True, timeout=300,
                   env={**__import__("os").environ, "PYTORCH_PRINT_REPRO_ON_FAILURE": "0"})
    rc = main(["refine", "--config", str(cfg), "--torch-root", str(root), "--results", str(xml), "--out", str(root / "out")])
    return root, cfg, rc


@pytest.mark.slow
def test_refine_rewrites_only_what_execution_contradicts(refined: tuple[Path, Path, int]) -> None:
    root, cfg, rc = refined
    assert rc == 0
    loaded = load_config(cfg, torch_root=root)
    file = loaded.files[0]
    ok = file.entry_for("TestReb::test_ok")
    assert ok is not None and ok.mode == "mandatory_success" and ok.reason == "a human note that must stay"
    mean = file.entry_for("TestReb::test_int_mean")
    assert mean is not None and mean.mode == "mandatory_success"
    assert mean.edits is not None and [d.name for d in mean.edits.dtypes.exclude] == ["int64"]
    mismatch = file.entry_for("TestReb::test_mismatch")
    assert mismatch is not None and mismatch.mode == "xfail_strict"
    assert "numerical_mismatch" in (mismatch.reason or "")
    assert (root / "out" / "changes.json").exists()


def test_refined_config_runs_green(refined: tuple[Path, Path, int]) -> None:
    root, cfg, _ = refined
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test/test_reb.py",
                           "--curate-config", str(cfg), "--curate-torch-root", str(root)],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "1 xfailed" in proc.stdout
