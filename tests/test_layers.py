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
    ("agents/offline/bucket.py", "from testcurator.agents.llm import client",
     "testcurator.agents.offline is not allowed to import testcurator.agents.llm"),
    ("agents/llm/brain.py", "from testcurator.agents.offline import rules",
     "testcurator.agents.llm is not allowed to import testcurator.agents.offline"),
    ("pipelines/upgrade/workflow.py", "from testcurator.pipelines import rebucket",
     "testcurator.pipelines.upgrade is not allowed to import testcurator.pipelines.rebucket"),
    ("runner/results/records.py", "from testcurator.runner.shards import merge",
     "testcurator.runner.results is not allowed to import testcurator.runner.shards"),
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


CIRCLE = "testcurator.cli.zz_circle"  # a package made for the test: the tree's own state does not matter
CIRCLE_CONTRACT = f"""
[[tool.importlinter.contracts]]
id = "circle"
name = "No import cycles in {CIRCLE}"
type = "tree_acyclic"
ancestors = ["{CIRCLE}"]
"""
CIRCLES = [
    # the package's files, what lint-imports must say, the modules its report must name
    ({"a.py": f"from {CIRCLE} import b\n", "b.py": f"from {CIRCLE} import a\n"},
     "BROKEN", [f"{CIRCLE}.a", f"{CIRCLE}.b"]),
    ({"a.py": f"from {CIRCLE} import b\n", "b.py": ""}, "KEPT", []),
    # a child importing a name from the package's __init__ imports no sibling
    ({"__init__.py": "from .a import A\n", "a.py": f"from {CIRCLE} import b\nA = 1\n",
      "b.py": f"from {CIRCLE} import A\n"}, "KEPT", []),
    # a subpackage is one sibling, with all its modules
    ({"a.py": f"from {CIRCLE}.sub import c\n", "sub/__init__.py": "", "sub/c.py": "",
      "sub/d.py": f"from {CIRCLE} import a\n"}, "BROKEN", [f"{CIRCLE}.a", f"{CIRCLE}.sub", f"{CIRCLE}.sub.d -> {CIRCLE}.a"]),
]


@pytest.fixture(scope="module")
def circle_tree(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of ``tree`` whose pyproject.toml has a ``tree_acyclic`` contract on CIRCLE."""
    dest = tmp_path_factory.mktemp("circle") / "tree"
    shutil.copytree(tree, dest)
    pyproject = (dest / "pyproject.toml").read_text(encoding="utf-8")
    if "TreeAcyclicContract" not in pyproject:
        pyproject = pyproject.replace("contract_types = [", "contract_types = [\n"
                                      '    "tree_acyclic: tests.lint_contracts.TreeAcyclicContract",', 1)
    (dest / "pyproject.toml").write_text(pyproject + CIRCLE_CONTRACT, encoding="utf-8")
    return dest


@pytest.mark.parametrize("files,verdict,names", CIRCLES, ids=["circle", "one-way", "via-init", "subpackage"])
def test_an_import_cycle_breaks_the_acyclic_contract(circle_tree: Path, files: dict[str, str], verdict: str,
                                                     names: list[str]) -> None:
    package = circle_tree / "cli" / CIRCLE.rsplit(".", 1)[1]
    shutil.rmtree(package, ignore_errors=True)
    for name, text in {"__init__.py": "", **files}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text, encoding="utf-8")
    proc = subprocess.run([str(LINT_IMPORTS), "--no-cache", "--contract", "circle"], cwd=circle_tree,
                          capture_output=True, text=True, timeout=120)
    text = " ".join(proc.stdout.split())
    assert proc.returncode == (1 if verdict == "BROKEN" else 0), proc.stdout + proc.stderr
    assert f"No import cycles in {CIRCLE} {verdict}" in text, proc.stdout
    assert all(name in text for name in names), proc.stdout


def test_no_package_folder_holds_more_than_twenty_modules() -> None:
    """Issue 27: a family of modules is a subpackage, not a prefix in a flat folder; and every
    subpackage is listed for installation (a wheel, unlike an editable install, would leave
    an unlisted one out)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    names = {folder: name for name, folder in setuptools["package-dir"].items()}
    folders = {p for top in names for p in [ROOT / top, *(ROOT / top).rglob("*")]
               if p.is_dir() and (p / "__init__.py").is_file()}
    crowded = {str(f.relative_to(ROOT)): n for f in folders if (n := len(list(f.glob("*.py")))) > 20}
    assert crowded == {}
    imported = {".".join([names[f.relative_to(ROOT).parts[0]], *f.relative_to(ROOT).parts[1:]]) for f in folders}
    assert len(imported) >= 19 and imported == set(setuptools["packages"])
