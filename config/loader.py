"""Load a config (one YAML file or a directory of them) into resolved, checked form.

Every problem is collected, not just the first, and reported as ``file:line:col:
message``; :func:`load_config` raises :class:`~testcurator.errors.ConfigError` carrying
them all. :func:`validate` goes further: a document with schema errors is checked as far as
it loads (its invalid parts pruned from the node tree, so every position stays the one in
the file), and its names get their checks in the same run. The merge of the parsed
documents into a :class:`~testcurator.config.resolve.LoadedConfig`, and how their paths
expand, are ``resolve.py``'s: this module calls it, never the other way.
"""

from __future__ import annotations

import copy
import gc
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from testcurator.config.resolve import LoadedConfig, expand_path, merge_documents
from testcurator.config.schema import ConfigDocument, FileEntry
from testcurator.config.yamlio import child, locate, node_at, read_yaml, to_data
from testcurator.errors import ConfigError, Location, Problem

M = TypeVar("M", bound=BaseModel)
CONFIG_SUFFIXES = (".yaml", ".yml")


def config_files(path: Path) -> list[Path]:
    """The YAML files a config path stands for (a file, or a directory's, sorted)."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.suffix in CONFIG_SUFFIXES and p.is_file())
    return [path]


def load_model(path: Path, model_cls: type[M]) -> tuple[M, Any]:
    """Parse ``path`` into ``model_cls``; returns the model and the positioned YAML tree."""
    if not path.exists():
        raise ConfigError([Problem(Location(str(path)), "file does not exist")])
    tree = read_yaml(path)
    data = to_data(tree, str(path))
    if not isinstance(data, dict):
        raise ConfigError([_not_a_mapping(path, tree, data, model_cls)])
    try:
        return model_cls.model_validate(data), tree
    except ValidationError as exc:
        raise ConfigError(pydantic_problems(exc, tree, str(path), model_cls)) from exc


def _not_a_mapping(path: Path, tree: Any, data: Any, model_cls: type[BaseModel]) -> Problem:
    """An empty, comment-only or scalar document, explained with a hint."""
    keys = [f.alias or name for name, f in model_cls.model_fields.items() if f.is_required()]
    expected = f"a mapping with the key{'s' if len(keys) > 1 else ''} {', '.join(keys)}" if keys else "a mapping"
    hint = "hint: `testcurator schema` prints the format" if model_cls.__name__ == "ConfigDocument" else \
        "hint: see README.md for an example"
    if tree is None:
        text = path.read_text(encoding="utf-8", errors="replace")
        lines = [line for line in text.splitlines() if line.strip()]
        if not lines:
            return Problem(Location(str(path), 1, 1), f"the file is empty; expected {expected} ({hint})")
        first = next(i for i, line in enumerate(text.splitlines(), start=1) if line.strip())
        return Problem(Location(str(path), first, 1),
                       f"the file holds only comments ({len(lines)} line(s)), no YAML content; "
                       f"expected {expected} ({hint})")
    found = "a list" if isinstance(data, list) else f"the value {data!r}"
    return Problem(locate(tree, (), str(path)), f"expected {expected}, found {found} ({hint})")


def pydantic_problems(exc: ValidationError, tree: Any, file: str, model_cls: type[BaseModel]) -> list[Problem]:
    """Pydantic's errors as positioned problems with messages a YAML author understands."""
    problems = []
    for err in exc.errors():
        loc = err["loc"]
        kind = err["type"]
        if kind == "extra_forbidden":
            allowed = _allowed_keys(model_cls, loc[:-1])
            hint = f" (expected one of: {', '.join(allowed)})" if allowed else ""
            message = f"unknown key {loc[-1]!r}{hint}"
            where = locate(tree, loc, file, at_key=True)
        else:
            where = locate(tree, loc, file)
            message = _message(err)
        problems.append(Problem(where, f"{_dotted(loc)}: {message}" if kind != "extra_forbidden" else message))
    return problems


def _message(err: Any) -> str:
    kind, msg = err["type"], err["msg"]
    if kind == "value_error":
        return str(err["ctx"]["error"])
    if kind == "literal_error":
        expected = msg.removeprefix("Input should be ")
        what = "mode" if str(err["loc"][-1]).endswith("mode") else "value"
        return f"unknown {what} {err.get('input')!r} (expected {expected})"
    if kind == "missing":
        return "required key is missing"
    return msg


def _dotted(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _allowed_keys(model_cls: type[BaseModel], loc: Sequence[Any]) -> list[str]:
    model: Any = model_cls
    for part in loc:
        if isinstance(part, int):
            continue
        model = _field_model(model, part)
        if model is None:
            return []
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _field_model(model: Any, key: str) -> Any:
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return None
    for name, info in model.model_fields.items():
        if key in (name, info.alias):
            return _inner_model(info.annotation)
    return None


def _inner_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def load_config(
    paths: Path | Iterable[Path], *, torch_root: Path | None = None, check_paths: bool = False
) -> LoadedConfig:
    """Load, validate and merge every config document; raise ConfigError on any problem."""
    with paused_gc():
        loaded, problems, _ = _load(paths, torch_root=torch_root, check_paths=check_paths)
    if problems:
        raise ConfigError(sorted(problems, key=problem_order))
    return loaded


def _load(
    paths: Path | Iterable[Path], *, torch_root: Path | None, check_paths: bool, salvage: bool = False
) -> tuple[LoadedConfig, list[Problem], list[tuple[Path, ConfigDocument, Any]]]:
    """Every document and every problem; with ``salvage``, a document with schema errors
    joins the merge as far as it validates (:func:`salvaged`), else a :class:`NotChecked`
    says its names were not checked."""
    roots = [paths] if isinstance(paths, Path) else list(paths)
    problems: list[Problem] = []
    docs: list[tuple[Path, ConfigDocument, Any]] = []
    for root in roots:
        if not root.exists():
            problems.append(Problem(Location(str(root)), "config path does not exist"))
            continue
        files = config_files(root)
        if not files:
            problems.append(Problem(Location(str(root)), "no .yaml/.yml config files in this directory"))
        for file in files:
            try:
                doc, tree = load_model(file, ConfigDocument)
            except ConfigError as exc:
                problems.extend(exc.problems)
                partial = salvaged(file, ConfigDocument) if salvage else None
                if partial is not None:
                    docs.append((file, *partial))
                elif salvage:
                    problems.append(NotChecked(Location(str(file)), NOT_CHECKED))
                continue
            docs.append((file, doc, tree))
    loaded, merge_problems = merge_documents(docs, torch_root=torch_root, check_paths=check_paths)
    problems.extend(merge_problems)
    return loaded, problems, docs


@contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection inside the block (a config loading, the plugin marking items).

    Both allocate many objects and none that form cycles; on a 50,000-entry config the
    collector's repeated full passes over the growing heap cost more than parsing itself
    (bench/config_load.py).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@dataclass(frozen=True)
class NotChecked(Problem):
    """Not an error of its own: checks that could not run on a file, listed after its errors."""


NOT_CHECKED = ("name checks (instantiated, duplicate and stale names, test paths) were not run on this file: it "
               "does not load past the errors above; they run once those are fixed")
_SALVAGE_ROUNDS = 20
PLACEHOLDER_MODE = "mandatory_success"  # for a misspelt mode while salvaging: the strictest, never a skip


def salvaged(file: Path, model_cls: type[M]) -> tuple[M, Any] | None:
    """``file``'s model without the parts that fail validation, and the node tree it was
    made from (pruned alike, so a later check locates its nodes at their place in the file);
    None when nothing sensible is left (a YAML error, the document itself wrong).

    Each round removes what pydantic rejected: an unknown key; a bad value's key (a default
    takes its place, or the next round finds it missing); the list item a missing key or a
    bad item belongs to (a test entry, a dtype). A test entry's misspelt ``mode`` is read as
    mandatory_success instead, so the entry's names are still checked (and a file is never
    taken as wholly skipped because of it). Problems of the pruned model are not the file's:
    the caller reports the first round's only."""
    try:
        tree = read_yaml(file)
        data = to_data(tree, str(file))
    except ConfigError:
        return None
    for _ in range(_SALVAGE_ROUNDS):
        if not isinstance(data, dict):
            return None
        try:
            return model_cls.model_validate(data), tree
        except ValidationError as exc:
            drop, swap = _prune_plan(tree, exc.errors())
            if not drop and not swap:
                return None  # nothing could be removed: the document itself is wrong
            pruned = _rebuild(tree, drop, swap)
            tree, data = pruned, to_data(pruned, str(file))
    return None


def _prune_target(tree: Any, err: Any) -> tuple[Any, ...]:
    """The node to remove for a pydantic error: its key, or for a missing key the list item
    that needed it; cut to the deepest node the document has (union tags are not keys)."""
    loc = tuple(err["loc"])
    if err["type"] == "missing":
        ints = [i for i, part in enumerate(loc) if isinstance(part, int)]
        loc = loc[:ints[-1] + 1] if ints else ()
    node, found = tree, 0
    for part in loc:
        hit = child(node, part)
        if hit is None:
            break
        node, found = hit[1], found + 1
    return loc[:found]


def _prune_plan(tree: Any, errors: Sequence[Any]) -> tuple[set[int], dict[int, Any]]:
    """The nodes to drop (ids of key nodes and list items) and the scalars to replace, all
    found in ``tree`` before any is touched (a removal would shift the later indexes)."""
    drop: set[int] = set()
    swap: dict[int, Any] = {}
    for err in errors:
        loc = tuple(err["loc"])
        if err["type"] == "literal_error" and loc[-1:] == ("mode",) and "tests" in loc:
            node = node_at(tree, loc)
            if node is not None and node.id == "scalar":
                placeholder = copy.copy(node)
                placeholder.value, placeholder.tag = PLACEHOLDER_MODE, "tag:yaml.org,2002:str"
                swap[id(node)] = placeholder
                continue
        target = _prune_target(tree, err)
        hit = child(node_at(tree, target[:-1]), target[-1]) if target else None
        if hit is not None:
            drop.add(id(hit[0]))
    return drop, swap


def _rebuild(node: Any, drop: set[int], swap: dict[int, Any]) -> Any:
    """A copy of the node tree without ``drop`` and with ``swap`` (every node keeps its marks)."""
    if id(node) in swap:
        return swap[id(node)]
    if node.id == "mapping":
        value: Any = [(k, _rebuild(v, drop, swap)) for k, v in node.value if id(k) not in drop]
    elif node.id == "sequence":
        value = [_rebuild(item, drop, swap) for item in node.value if id(item) not in drop]
    else:
        return node
    out = copy.copy(node)
    out.value = value
    return out


def problem_order(problem: Problem) -> tuple[str, bool, int, int]:
    loc = problem.location
    return (loc.file, isinstance(problem, NotChecked), loc.line or 0, loc.col or 0)


def file_entry_location(tree: Any, file: Path, index: int) -> Location:
    return locate(tree, ("test_suite_config", "files", index), str(file))


def validate(paths: Sequence[Path], torch_root: Path | None = None, *, allow_outside_root: bool = False) -> list[Problem]:
    """Every problem in ``paths`` (``testcurator validate``); empty when all is well.

    Beyond loading: every test path must name a Python test file (``test_*.py`` or
    ``*_test.py``), inside the torch root unless ``allow_outside_root``; an instantiated
    test name gets the generic name to write, from the upstream file's own definitions.
    """
    with paused_gc():
        loaded, problems, docs = _load(paths, torch_root=torch_root, check_paths=True, salvage=True)
    root = torch_root or (Path(os.environ["TORCH_ROOT"]) if os.environ.get("TORCH_ROOT") else None)
    for source, doc, tree in docs:
        for index, entry in enumerate(doc.test_suite_config.files):
            path, _ = expand_path(entry.path, torch_root, source.parent)
            if path is None:
                continue  # already reported: the path does not expand
            where = locate(tree, ("test_suite_config", "files", index, "path"), str(source))
            problems.extend(Problem(where, message) for message in upstream_path_problems(path, root, allow_outside_root))
            problems.extend(param_name_problems(source, tree, index, entry, path))
    return sorted(problems, key=problem_order)


def param_name_problems(source: Path, tree: Any, index: int, entry: FileEntry, upstream: Path) -> list[Problem]:
    """``edits.params`` names the test does not take, when the upstream file is at hand."""
    from testcurator.config.params import parametrized_args, unknown_params

    wanted = [(t, test) for t, test in enumerate(entry.tests) if test.edits and test.edits.params]
    known = parametrized_args(upstream) if wanted else {}
    out = []
    for t_index, test in wanted:
        for r_index, ref in enumerate(test.edits.params.exclude):  # type: ignore[union-attr]
            loc = ("test_suite_config", "files", index, "tests", t_index, "edits", "params", "exclude", r_index, "name")
            for name in test.names:
                out.extend(Problem(locate(tree, loc, str(source)), m) for m in unknown_params([ref.name], name, known))
    return out


def upstream_path_problems(path: Path, root: Path | None, allow_outside_root: bool) -> list[str]:
    """Why ``path`` cannot be an upstream test file (empty when it can)."""
    out = []
    real = Path(os.path.realpath(path))
    if root is not None and not allow_outside_root:
        real_root = Path(os.path.realpath(root))
        if real != real_root and real_root not in real.parents:
            out.append(f"test path resolves outside the torch root {real_root}: {real} "
                       "(pass --allow-outside-root to accept it)")
    if real.suffix != ".py":
        out.append(f"not a Python test file: {real.name} (expected test_*.py or *_test.py)")
    elif not (real.name.startswith("test_") or real.name.endswith("_test.py")):
        out.append(f"not a Python test file by name: {real.name} (expected test_*.py or *_test.py; "
                   "pytest would not collect it)")
    return out


__all__ = [
    "FileEntry",
    "config_files",
    "NotChecked",
    "load_config",
    "load_model",
    "problem_order",
    "upstream_path_problems",
    "validate",
]
