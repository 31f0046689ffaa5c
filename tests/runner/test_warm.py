"""A pytest started ahead (runner/warm.py) runs what a new ``python -m pytest`` would."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from testcurator.runner.command import pytest_argv, run_logged
from testcurator.runner.warm import WarmPytest, torch_test_modules

# The witness module marks that it was imported before pytest started (the preload).
TESTS = """\
import sys


def test_preloaded():
    assert "witness" in sys.modules


def test_fails():
    assert 0
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (root / "witness.py").write_text("", encoding="utf-8")
    (root / "test_w.py").write_text(TESTS, encoding="utf-8")
    return root


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


def _summary(log: Path) -> str:
    return log.read_text(encoding="utf-8").strip().splitlines()[-1]


def test_it_runs_the_same_pytest_after_its_preload(tree: Path, tmp_path: Path) -> None:
    argv = pytest_argv("-q", "-p", "no:testcurator", "test_w.py")
    fresh = run_logged(argv, cwd=tree, env=_env(), log=tmp_path / "fresh.log")
    with WarmPytest(tree, _env(), ["witness"]) as warm:
        assert warm.fits(argv, tree, _env())
        ran = warm.run(argv, tmp_path / "warm.log")
    # A fresh pytest has not imported the witness; the warm one had, before its arguments came.
    assert (fresh, ran) == (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.TESTS_FAILED)
    assert _summary(tmp_path / "fresh.log").startswith("2 failed")
    assert _summary(tmp_path / "warm.log").startswith("1 failed, 1 passed")


@pytest.mark.parametrize("change", ["cwd", "env", "command", "used"])
def test_it_refuses_what_a_new_process_would_run_differently(tree: Path, tmp_path: Path, change: str) -> None:
    argv, cwd, env = pytest_argv("-q", "test_w.py"), tree, _env()
    with WarmPytest(tree, _env()) as warm:
        if change == "cwd":
            cwd = tmp_path
        elif change == "env":
            env = {**env, "PYTORCH_TESTING_DEVICE_ONLY_FOR": "cpu"}
        elif change == "command":
            argv = [sys.executable, "-c", "pass"]
        else:
            warm.run(argv, tmp_path / "first.log")
        assert not warm.fits(argv, cwd, env)


def test_an_unused_one_is_killed_mid_import(tree: Path) -> None:
    warm = WarmPytest(tree, _env(), ["torch.testing._internal.common_methods_invocations"])
    warm.close()
    # Killed, not waited for (a clock bound flakes on a loaded machine): an interpreter left to
    # finish its import of op_db would read its closed stdin and exit 0.
    assert warm._proc.returncode == -signal.SIGKILL
    assert not warm.fits(pytest_argv("test_w.py"), tree, _env())


def test_torch_test_modules_are_those_files_import(tmp_path: Path) -> None:
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("import torch\nfrom torch.testing._internal.common_utils import TestCase\n"
                 "    import torch.testing._internal.opinfo.core as core\n", encoding="utf-8")
    b.write_text("from torch.testing._internal.common_device_type import ops  # noqa\nimport json\n", encoding="utf-8")
    assert torch_test_modules([a, b, tmp_path / "gone.py"]) == [
        "torch.testing._internal.common_device_type", "torch.testing._internal.common_utils",
        "torch.testing._internal.opinfo.core"]
