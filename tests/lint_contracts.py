"""import-linter contract types that see the whole ``testcurator`` package.

The package is assembled from top-level folders by ``package-dir`` (pyproject.toml). An
editable install maps each subpackage to its folder through an import hook, so the module
finder import-linter uses (grimp, which walks the package's directory) sees ``core/``
alone and reports ``testcurator.config`` missing. These contract types check the same
rules against a graph built from a link tree: a temporary ``testcurator/`` folder whose
entries are symlinks to the folders ``package-dir`` names, read from the pyproject.toml
in the working directory (the repository root ``lint-imports`` runs from). The rules
themselves are import-linter's own (layers, forbidden, independence).
"""

from __future__ import annotations

import copy
import shutil
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import grimp
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.independence import IndependenceContract
from importlinter.contracts.layers import LayersContract
from importlinter.domain.contract import ContractCheck

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: import-linter depends on tomli there
    import tomli as tomllib  # type: ignore[no-redef]

PACKAGE = "testcurator"


def link_tree(root: Path, dest: Path) -> Path:
    """``dest/testcurator``: the root package's modules and one link per subpackage folder."""
    mapping: dict[str, str] = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))[
        "tool"]["setuptools"]["package-dir"]
    package = dest / PACKAGE
    package.mkdir()
    for module in sorted((root / mapping[PACKAGE]).glob("*.py")):
        (package / module.name).symlink_to(module.resolve())
    for name, folder in mapping.items():
        if name != PACKAGE:
            (package / name.removeprefix(PACKAGE + ".")).symlink_to((root / folder).resolve(), target_is_directory=True)
    return dest


@lru_cache(maxsize=1)
def whole_graph(root: Path, exclude_type_checking_imports: bool) -> grimp.ImportGraph:
    """The import graph of every testcurator module in the tree at ``root``."""
    tmp = Path(tempfile.mkdtemp(prefix="importlinter-tree-"))
    # find_spec answers from sys.modules first: hide an imported testcurator meanwhile.
    hidden = {k: sys.modules.pop(k) for k in list(sys.modules) if k == PACKAGE or k.startswith(PACKAGE + ".")}
    sys.path.insert(0, str(link_tree(root, tmp)))
    try:
        return grimp.build_graph(PACKAGE, cache_dir=None, exclude_type_checking_imports=exclude_type_checking_imports)
    finally:
        sys.path.remove(str(tmp))
        sys.modules.update(hidden)
        shutil.rmtree(tmp, ignore_errors=True)


def _graph(session_options: dict[str, Any]) -> grimp.ImportGraph:
    exclude = str(session_options.get("exclude_type_checking_imports", False)).lower() == "true"
    return copy.deepcopy(whole_graph(Path.cwd(), exclude))  # a contract may edit the graph it checks


class TreeLayersContract(LayersContract):
    """import-linter's ``layers`` contract, over the whole package."""

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        return super().check(_graph(self.session_options), verbose)


class TreeForbiddenContract(ForbiddenContract):
    """import-linter's ``forbidden`` contract, over the whole package."""

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        return super().check(_graph(self.session_options), verbose)


class TreeIndependenceContract(IndependenceContract):
    """import-linter's ``independence`` contract, over the whole package."""

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        return super().check(_graph(self.session_options), verbose)
