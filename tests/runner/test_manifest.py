"""The reproducibility manifest: hashes, git revision, versions, per-test outcomes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from testcurator.runner.command import RunSpec, Selection
from testcurator.installed import version_fields
from testcurator.runner.manifest import build_manifest, config_hash, git_revision
from testcurator.runner.results.records import TestRecord


def test_config_hash_follows_bytes_and_names(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "a.yaml").write_text("test_suite_config: {}\n")
    first = config_hash(cfg)
    assert first == config_hash(cfg)
    (cfg / "a.yaml").write_text("test_suite_config: {labels: [x]}\n")
    second = config_hash(cfg)
    (cfg / "a.yaml").rename(cfg / "b.yaml")
    assert len({first, second, config_hash(cfg)}) == 3


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_revision_of_a_checkout(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True, text=True).stdout.strip()

    assert git_revision(tmp_path) is None
    git("init", "-q")
    (tmp_path / "f.py").write_text("x = 1\n")
    git("add", "f.py")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "m")
    assert git_revision(tmp_path) == {"revision": git("rev-parse", "HEAD"), "dirty": False}
    (tmp_path / "f.py").write_text("x = 2\n")
    assert git_revision(tmp_path)["dirty"] is True  # type: ignore[index]


def test_manifest_fields(tmp_path: Path) -> None:
    spec = RunSpec(out_dir=tmp_path, paths=("t.py",), device="curatedev", command=("testcurator", "exec", "t.py"))
    records = [TestRecord("t.py::A::test_a", "passed", duration=0.5), TestRecord("t.py::A::test_b", "crashed", failure_class="crash")]
    manifest = build_manifest(spec, Selection(("t.py",)), records, [["python", "-m", "pytest"]], 100.0, 101.5)
    assert manifest["torch"] == {"version": torch.__version__, "git_version": torch.version.git_version,
                                 "cuda": torch.version.cuda}
    assert version_fields()["version"] == torch.__version__
    assert manifest["command"] == ["testcurator", "exec", "t.py"] and manifest["wall_s"] == 1.5
    assert manifest["backend"]["device"] == "curatedev"
    assert manifest["tests"]["t.py::A::test_b"] == {"outcome": "crashed", "duration": 0.0, "failure_class": "crash"}
    assert manifest["counts"]["passed"] == 1 and manifest["python"]["version"]
    assert manifest["cpu"]["count"] and manifest["os"]["system"]
