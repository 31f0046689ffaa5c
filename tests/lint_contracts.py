"""import-linter contract types that see the whole ``testcurator`` package.

The package is assembled from top-level folders by ``package-dir`` (pyproject.toml). An
editable install maps each subpackage to its folder through an import hook, so the module
finder import-linter uses (grimp, which walks the package's directory) sees ``core/``
alone and reports ``testcurator.config`` missing. These contract types check the same
rules against a graph built from a link tree: a temporary ``testcurator/`` folder whose
entries are symlinks to the folders ``package-dir`` names, read from the pyproject.toml
in the working directory (the repository root ``lint-imports`` runs from). The rules
themselves are import-linter's own (layers, forbidden, independence, acyclic_siblings).
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
from importlinter.application import output
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
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


class TreeAcyclicContract(AcyclicSiblingsContract):
    """import-linter's ``acyclic_siblings`` contract, over the whole package.

    Options are import-linter's: ``ancestors`` (the packages whose children must not import
    each other in a circle, a subpackage counting as one with all its modules), ``depth``
    (how far below each ancestor to check the same; 0 for its own children only, default
    10), ``skip_descendants``, ``ignore_imports``. ``acyclic_siblings`` names only imports
    whose removal would break the cycles; this report first names each cycle's members and
    one import (file line) per edge in it, so a developer can see what to move.
    """

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        graph = _graph(self.session_options)
        check = super().check(graph, verbose)  # drops ignore_imports from graph
        check.metadata["cycles"] = {
            package: sibling_cycles(graph, package) for package in sorted(check.metadata["cycle_breakers_by_package"])}
        return check

    def render_broken_contract(self, check: ContractCheck) -> None:
        for package, cycles in check.metadata["cycles"].items():
            for members, imports in cycles:
                output.print_error(f"Cycle between children of {package}: {', '.join(members)}")
                for line in imports:
                    output.print_error(f"- {line}", bold=False)
                output.new_line()
        super().render_broken_contract(check)


def sibling_cycles(graph: grimp.ImportGraph, package: str) -> list[tuple[list[str], list[str]]]:
    """The import cycles between the children of ``package``, each a subpackage with all its
    modules: per cycle its members and, per edge between them, one import as
    ``importer -> imported (l. N: line)``. Imports of ``package`` itself do not count."""
    prefix = package + "."
    examples: dict[tuple[str, str], str] = {}
    for child in sorted(graph.find_children(package)):
        for importer in sorted({child} | graph.find_descendants(child)):
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                target = prefix + imported.removeprefix(prefix).split(".")[0]
                if imported.startswith(prefix) and target != child and (child, target) not in examples:
                    examples[child, target] = _example(graph, importer, imported)
    successors: dict[str, set[str]] = {}
    for importer, imported in examples:
        successors.setdefault(importer, set()).add(imported)
    reach = {node: _reachable(successors, node) for node in successors}
    cycles = sorted({tuple(sorted({node} | {m for m in reach[node] if node in reach.get(m, ())}))
                     for node in reach if node in reach[node]})
    return [(list(members), [line for (a, b), line in sorted(examples.items()) if a in members and b in members])
            for members in cycles]


def _reachable(successors: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(successors.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(successors.get(node, ()))
    return seen


def _example(graph: grimp.ImportGraph, importer: str, imported: str) -> str:
    details = sorted(graph.get_import_details(importer=importer, imported=imported), key=lambda d: d["line_number"])
    where = f" (l. {details[0]['line_number']}: {details[0]['line_contents']})" if details else ""
    return f"{importer} -> {imported}{where}"
