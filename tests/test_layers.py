"""The layer contracts (pyproject.toml, [tool.importlinter]) hold, and they catch a wrong-way import."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: import-linter depends on tomli there
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_every_contract_is_kept() -> None:
    proc = lint_imports(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = [c["name"] for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]]
    text = " ".join(proc.stdout.split())  # lint-imports wraps long names
    assert f"Contracts: {len(names)} kept, 0 broken." in text
    assert all(f"{' '.join(name.split())} KEPT" in text for name in names)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package folders, pyproject.toml and the contract types."""
    dest = tmp_path_factory.mktemp("tree")
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for folder in mapping.values():
        shutil.copytree(ROOT / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dest)
    (dest / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "lint_contracts.py", dest / "tests")
    return dest


WRONG_WAY = [
    # file importing, the import added, what lint-imports must say
    ("config/schema.py", "from testcurator.pipelines import emit",
     "testcurator.config is not allowed to import testcurator.pipelines"),
    ("memory/stage.py", "from testcurator.agents import brain",
     "testcurator.memory is not allowed to import testcurator.agents"),
    ("plugin/curate.py", "from testcurator.memory import opmap",
     "testcurator.plugin is not allowed to import testcurator.memory"),
    ("core/vocab.py", "from testcurator.config import schema",
     "testcurator.vocab is not allowed to import testcurator.config"),
    ("agents/offline_bucket.py", "from testcurator.agents import llm_client",
     "testcurator.agents.offline_bucket is not allowed to import testcurator.agents.llm_client"),
    ("pipelines/upgrade.py", "from testcurator.pipelines import rebucket",
     "testcurator.pipelines.upgrade is not allowed to import testcurator.pipelines.rebucket"),
]


@pytest.mark.parametrize("path,line,message", WRONG_WAY, ids=[w[0] for w in WRONG_WAY])
def test_a_wrong_way_import_breaks_a_contract(tree: Path, path: str, line: str, message: str) -> None:
    target = tree / path
    original = target.read_text(encoding="utf-8")
    assert lint_imports(tree).returncode == 0  # the copy itself is clean
    try:
        target.write_text(original + f"\n{line}  # wrong way\n", encoding="utf-8")
        proc = lint_imports(tree)
    finally:
        target.write_text(original, encoding="utf-8")
    assert proc.returncode == 1, proc.stdout
    assert message in " ".join(proc.stdout.split())
