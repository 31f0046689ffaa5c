"""The resolved config (:class:`LoadedConfig`, :class:`ResolvedFile`, :class:`ResolvedEntry`)
and the merge of parsed documents into it, with semantic checks.

The types live here, beside the one function that builds them, so that the loader (which
parses files and then calls :func:`merge_documents`) and every consumer (``apply.py``, the
curate plugin, the pipelines) import them from a module that imports no loader: this
module never parses a file itself.

Checks beyond the schema: a path that does not expand or (for ``validate``) does not
exist, the same upstream file listed twice, the same test listed twice in one file, a
dtype both excluded and included, documents that disagree on ``unlisted_file_mode``.
Paths expand ``${TORCH_ROOT}`` and any other ``${VAR}`` from the environment
(:func:`expand_path`); a relative path resolves against the torch root (or, without one,
the config's folder).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from testcurator.config.params import config_value, param_ref
from testcurator.config.schema import Capabilities, ConfigDocument, Edits, FileEntry, TestEntry
from testcurator.config.yamlio import locate, node_at, position
from testcurator.config.upstream_names import defined_tests, variant_names
from testcurator.errors import Location, Problem
from testcurator.names import instantiated_hint

DEFAULT_UNLISTED_FILE_MODE = "skip"
_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class ResolvedEntry:
    """One ``tests`` entry with where it came from and the reason written above it."""

    names: tuple[str, ...]
    mode: str
    edits: Edits | None
    reason: str | None
    location: Location

    def exclusions(self) -> Exclusions:
        """What its edits exclude, as a decision and a prediction name it: dtypes, ops
        (``OpRef.entries``), modules and params (``name=value``, config/params.param_ref)."""
        edits = self.edits
        if edits is None:
            return Exclusions()
        return Exclusions(
            dtypes=tuple(d.name for d in edits.dtypes.exclude) if edits.dtypes else (),
            ops=tuple(e for o in edits.ops.exclude for e in o.entries()) if edits.ops else (),
            modules=tuple(m.name for m in edits.modules.exclude) if edits.modules else (),
            params=tuple(param_ref(p.name, config_value(v)) for p in edits.params.exclude for v in p.values)
            if edits.params else ())


class Exclusions(NamedTuple):
    dtypes: tuple[str, ...] = ()
    ops: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    params: tuple[str, ...] = ()


@dataclass(frozen=True)
class ResolvedFile:
    """One ``files`` entry, its path resolved and its capabilities made effective."""

    raw_path: str
    resolved_path: Path
    unlisted_test_mode: str
    capabilities: Capabilities
    entries: tuple[ResolvedEntry, ...]
    location: Location
    by_name: dict[str, ResolvedEntry] = field(default_factory=dict, compare=False, repr=False)
    labels: tuple[str, ...] = ()  # its document's labels and its own (--curate-labels)

    def entry_for(self, generic: str) -> ResolvedEntry | None:
        """The entry naming ``generic`` exactly (never a prefix or substring)."""
        return self.by_name.get(generic)


@dataclass(frozen=True)
class LoadedConfig:
    """A whole config: every document, merged."""

    sources: tuple[Path, ...]
    labels: tuple[str, ...]
    unlisted_file_mode: str
    files: tuple[ResolvedFile, ...]
    _by_path: dict[str, ResolvedFile] = field(default_factory=dict, compare=False, repr=False)

    def file_for(self, path: Path | str) -> ResolvedFile | None:
        """The entry for an upstream test file, compared by real path."""
        return self._by_path.get(_key(Path(path)))


def _key(path: Path) -> str:
    return os.path.realpath(path)



def expand_path(raw: str, torch_root: Path | None, base: Path) -> tuple[Path | None, str | None]:
    """Expand ``${VAR}``s; returns (path, None) or (None, the problem)."""
    env = dict(os.environ)
    if torch_root is not None:
        env["TORCH_ROOT"] = str(torch_root)
    missing = [v for v in _VAR_RE.findall(raw) if v not in env]
    if missing:
        return None, f"path {raw!r} uses undefined variable ${{{missing[0]}}} (set it, or pass --torch-root for TORCH_ROOT)"
    path = Path(_VAR_RE.sub(lambda m: env[m.group(1)], raw)).expanduser()
    if not path.is_absolute():
        path = (torch_root if torch_root is not None else base) / path
    return path, None


def effective_capabilities(top: Capabilities | None, per_file: Capabilities | None) -> Capabilities:
    """Per-file ``global`` overrides the top-level one field by field."""
    top = top or Capabilities()
    if per_file is None:
        return top
    return Capabilities(
        supported_dtypes=per_file.supported_dtypes if per_file.supported_dtypes is not None else top.supported_dtypes,
        supported_ops=per_file.supported_ops if per_file.supported_ops is not None else top.supported_ops,
    )


def comment_above(lines: Sequence[str], line_index: int) -> str | None:
    """The ``#`` comment block directly above 0-based ``line_index`` (the entry's reason).

    The inverse of :func:`testcurator.config.editor.comment_lines`: wrapped lines join with
    one space, a bare ``#`` line separates paragraphs.
    """
    out: list[str] = []
    i = line_index - 1
    while i >= 0 and lines[i].lstrip().startswith("#"):
        out.append(lines[i].lstrip()[1:].strip())
        i -= 1
    paragraphs: list[list[str]] = [[]]
    for line in reversed(out):
        if line:
            paragraphs[-1].append(line)
        elif paragraphs[-1]:
            paragraphs.append([])
    text = "\n".join(" ".join(p) for p in paragraphs if p)
    return text or None


def merge_documents(
    docs: Sequence[tuple[Path, ConfigDocument, Any]], *, torch_root: Path | None, check_paths: bool
) -> tuple[LoadedConfig, list[Problem]]:
    problems: list[Problem] = []
    files: list[ResolvedFile] = []
    by_path: dict[str, ResolvedFile] = {}
    labels: list[str] = []
    modes: dict[str, Location] = {}
    for source, doc, tree in docs:
        suite = doc.test_suite_config
        labels.extend(label for label in suite.labels if label not in labels)
        if node_at(tree, ("test_suite_config", "unlisted_file_mode")) is not None or not modes:
            modes.setdefault(suite.unlisted_file_mode, locate(tree, ("test_suite_config", "unlisted_file_mode"), str(source)))
        lines = source.read_text(encoding="utf-8").splitlines()
        for index, entry in enumerate(suite.files):
            resolved = _resolve_file(source, tree, lines, index, entry, suite.global_, torch_root, check_paths, problems)
            if resolved is None:
                continue
            resolved = replace(resolved, labels=tuple(dict.fromkeys([*suite.labels, *entry.labels])))
            key = _key(resolved.resolved_path)
            if key in by_path:
                first = by_path[key].location
                problems.append(Problem(resolved.location, f"file {entry.path!r} is already listed at {first}"))
                continue
            by_path[key] = resolved
            files.append(resolved)
    if len(modes) > 1:
        where = sorted(modes.items(), key=lambda kv: str(kv[1]))
        for mode, loc in where[1:]:
            problems.append(Problem(loc, f"unlisted_file_mode {mode!r} disagrees with {where[0][0]!r} at {where[0][1]}"))
    mode = next(iter(modes), DEFAULT_UNLISTED_FILE_MODE)
    loaded = LoadedConfig(
        sources=tuple(source for source, _, _ in docs),
        labels=tuple(labels),
        unlisted_file_mode=mode,
        files=tuple(files),
        _by_path=by_path,
    )
    return loaded, problems


def _resolve_file(
    source: Path,
    tree: Any,
    lines: Sequence[str],
    index: int,
    entry: FileEntry,
    top: Capabilities | None,
    torch_root: Path | None,
    check_paths: bool,
    problems: list[Problem],
) -> ResolvedFile | None:
    base_loc = ("test_suite_config", "files", index)
    path_loc = locate(tree, (*base_loc, "path"), str(source))
    path, problem = expand_path(entry.path, torch_root, source.parent)
    if path is None:
        problems.append(Problem(path_loc, problem or "bad path"))
        return None
    if check_paths and not path.is_file():
        problems.append(Problem(path_loc, f"upstream test file does not exist: {path}"))
    entries = _resolve_entries(source, tree, lines, base_loc, entry.tests, problems, path)
    by_name = {name: e for e in entries for name in e.names}
    return ResolvedFile(
        raw_path=entry.path,
        resolved_path=path,
        unlisted_test_mode=entry.unlisted_test_mode,
        capabilities=effective_capabilities(top, entry.global_),
        entries=tuple(entries),
        location=locate(tree, base_loc, str(source)),
        by_name=by_name,
    )


def _resolve_entries(
    source: Path,
    tree: Any,
    lines: Sequence[str],
    base_loc: tuple[Any, ...],
    tests: Sequence[TestEntry],
    problems: list[Problem],
    upstream: Path,
) -> list[ResolvedEntry]:
    # Positions straight from the ``tests`` sequence node: one walk per file, not per entry
    # (PyTorch-size configs hold tens of thousands of entries).
    items = getattr(node_at(tree, (*base_loc, "tests")), "value", None) or []
    file = str(source)
    seen: dict[str, tuple[int, int]] = {}
    out: list[ResolvedEntry] = []
    for t_index, test in enumerate(tests):
        entry_loc = position(items[t_index], file) if t_index < len(items) else locate(tree, (*base_loc, "tests"), file)
        for n_index, name in enumerate(test.names):
            if instantiated_hint(name) is not None:
                name_loc = locate(tree, (*base_loc, "tests", t_index, "names", n_index), file)
                problems.append(Problem(name_loc, instantiated_message(name, upstream)))
            if name in seen:
                name_loc = locate(tree, (*base_loc, "tests", t_index, "names", n_index), file)
                first = locate(tree, (*base_loc, "tests", *seen[name][:1], "names", *seen[name][1:]), file)
                problems.append(Problem(name_loc, f"test {name} is listed twice in this file (first at line {first.line})"))
            else:
                seen[name] = (t_index, n_index)  # located only when a duplicate needs it
        if test.edits is not None:
            _check_edits(source, tree, (*base_loc, "tests", t_index), test, problems)
        reason = test.reason or comment_above(lines, (entry_loc.line or 1) - 1)
        out.append(ResolvedEntry(tuple(test.names), test.mode, test.edits, reason, entry_loc))
    return out


def instantiated_message(name: str, upstream: Path | None) -> str:
    """What to write instead of the instantiated ``name``, as sure as what is known allows."""
    plain = instantiated_hint(name) or name
    head = f"name {name!r} is an instantiated name; write the device-generic"
    known = defined_tests(upstream) if upstream is not None else frozenset()
    if known:
        exact = instantiated_hint(name, known_tests=known)
        if exact in known:
            return f"{head} {exact!r}"
        return f"{head} name: {plain!r} or a prefix of it, but {upstream.name} defines no such test"  # type: ignore[union-attr]
    guess = instantiated_hint(name, variant_names=variant_names())
    if guess != plain:
        cut = plain.partition("::")[2][len(guess.partition("::")[2]) + 1:]  # type: ignore[union-attr]
        return (f"{head} {guess!r} ({cut!r} is the OpInfo/ModuleInfo part; with the upstream file found "
                "through --torch-root, its own tests confirm the name)")
    return f"{head} {plain!r}, less any @parametrize values (pass --torch-root to check against the upstream file)"


def _check_edits(source: Path, tree: Any, loc: tuple[Any, ...], test: TestEntry, problems: list[Problem]) -> None:
    if test.edits is None or test.edits.dtypes is None:
        return
    both = {d.name for d in test.edits.dtypes.exclude} & {d.name for d in test.edits.dtypes.include}
    for name in sorted(both):
        where = locate(tree, (*loc, "edits", "dtypes"), str(source))
        problems.append(Problem(where, f"dtype {name} is both excluded and included"))
