"""What changed between two configs, per upstream file and per generic test.

``testcurator review OLD NEW`` diffs two configs the way a reviewer reads a PR: which
tests were added, removed, changed mode, edits or reason, with the reason and the
evidence (where the entry is written) of both sides. Each side is a config file or
directory, or ``REV:PATH`` (a git revision of a path relative to the repository root, as
``git show`` takes it), read with ``git ls-tree``/``git show`` into a temporary directory:
the work tree is never touched.

Files are matched by their raw ``path`` (as written, ``${TORCH_ROOT}`` unexpanded), tests by
their generic name. A test newly listed was, before, governed by its file's
``unlisted_test_mode``; that is its "old" outcome in transitions (and likewise for a test
no longer listed), so ``mandatory_success -> skip`` is counted whether it happened by an
edit or by dropping the entry.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from testcurator.config.loader import config_files, load_config, load_model
from testcurator.config.resolve import LoadedConfig, ResolvedEntry, ResolvedFile
from testcurator.config.schema import Capabilities, ConfigDocument, Edits
from testcurator.errors import BadInputError
from testcurator.vocab import MODES_BY_STRICTNESS

PLACEHOLDER_ROOT = Path("/TORCH_ROOT")  # paths are compared as written; nothing is resolved


@dataclass(frozen=True)
class TestChange:
    name: str
    kind: str  # added | removed | changed
    aspects: tuple[str, ...]  # of: mode, edits, reason
    old_mode: str | None  # the entry's mode; None when not listed
    new_mode: str | None
    old_effective: str  # entry mode, else the file's unlisted_test_mode (or "absent")
    new_effective: str
    old_reason: str | None = None
    new_reason: str | None = None
    old_edits: str | None = None
    new_edits: str | None = None
    old_where: str | None = None
    new_where: str | None = None
    edits_added: tuple[str, ...] = ()  # edit items only the new entry has ("exclude dtype int64")
    edits_removed: tuple[str, ...] = ()  # edit items only the old entry had
    lost_mandatory: bool = False  # mandatory_success before (listed or by default), not after
    stale_reason: bool = False  # the mode changed and the reason written above it did not
    old_excerpt: tuple[tuple[int, str], ...] = ()  # (line, text): the old entry and its comment
    new_excerpt: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class FileChange:
    raw_path: str
    kind: str  # added | removed | changed
    old_unlisted: str | None
    new_unlisted: str | None
    capabilities: tuple[str, ...]  # "+ supported_dtypes float16" style, beyond the global ones
    tests: tuple[TestChange, ...]


@dataclass(frozen=True)
class Summary:
    old_counts: dict[str, int]
    new_counts: dict[str, int]
    transitions: dict[str, int]  # "mandatory_success -> skip": n
    added: int
    removed: int
    changed: int
    mandatory_before: int
    mandatory_lost: int  # named tests mandatory_success before and not after
    lost_tests: tuple[str, ...] = ()  # "path::Class::test" of each of them
    stale_reasons: int = 0  # tests whose mode changed under an unchanged reason
    # mandatory_success on both sides, with an exclusion only the new side has (fewer instances must pass)
    narrowed_tests: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReviewReport:
    old_label: str
    new_label: str
    global_changes: tuple[str, ...]
    files: tuple[FileChange, ...]
    summary: Summary
    notes: tuple[str, ...] = field(default_factory=tuple)
    # (test as ``raw_path::Class::test``, cause): what changed between the two runs that wrote
    # the sides (pipelines/nights/since.py), when NEW has a run record beside it; else empty.
    causes: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @property
    def empty(self) -> bool:
        return not self.global_changes and not self.files


@dataclass(frozen=True)
class Side:
    label: str
    root: Path
    config: LoadedConfig
    global_caps: frozenset[str]
    lines: dict[str, list[str]] = field(default_factory=dict, compare=False, repr=False)  # file -> its lines

    def excerpt(self, entry: ResolvedEntry, limit: int = 16) -> tuple[tuple[int, str], ...]:
        """The entry's lines with the comment block above it: what a link to it shows."""
        if entry.location.line is None:
            return ()
        file = entry.location.file
        if file not in self.lines:
            self.lines[file] = Path(file).read_text(encoding="utf-8").splitlines()
        return entry_excerpt(self.lines[file], entry.location.line, limit)


def entry_excerpt(lines: list[str], line: int, limit: int = 16) -> tuple[tuple[int, str], ...]:
    """Lines of the list item at 1-based ``line``: comments above, then the item to its end."""
    first = line - 1
    while first > 0 and lines[first - 1].lstrip().startswith("#"):
        first -= 1
    head = lines[line - 1]
    indent = len(head) - len(head.lstrip(" -"))  # column of the item's content
    last = line
    while last < len(lines) and last - first < limit:
        text = lines[last]
        stripped = text.lstrip(" ")
        if stripped and (len(text) - len(stripped) < indent or stripped.startswith("#")):
            break
        last += 1
    while last > line and not lines[last - 1].strip():
        last -= 1
    return tuple((n + 1, lines[n]) for n in range(first, min(last, first + limit)))


# --- reading a side -----------------------------------------------------------------------
@contextmanager
def open_side(spec: str, repo: Path | None = None) -> Iterator[Side]:
    """A config from a path, or from ``REV:PATH`` in the git repository ``repo`` (or cwd)."""
    path = Path(spec)
    if path.exists() or ":" not in spec:
        if not path.exists():
            raise BadInputError(f"config path does not exist: {spec}")
        yield _side(spec, path)
        return
    rev, _, rel = spec.partition(":")
    with tempfile.TemporaryDirectory(prefix="curate-review-") as tmp:
        root = _materialise(repo or Path.cwd(), rev, rel.strip("/"), Path(tmp))
        yield _side(spec, root)


def _git(repo: Path, *args: str) -> bytes:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)
    if proc.returncode != 0:
        raise BadInputError(f"git {' '.join(args)} failed in {repo}: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def _materialise(repo: Path, rev: str, rel: str, tmp: Path) -> Path:
    names = [n for n in _git(repo, "ls-tree", "-r", "-z", "--name-only", "--full-tree", rev, "--", rel or ".").decode().split("\0") if n]
    if not names:
        raise BadInputError(f"{rev}:{rel} names nothing in the git repository {repo}")
    for name in names:
        if Path(name).suffix not in (".yaml", ".yml"):
            continue
        target = tmp / "tree" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_git(repo, "show", f"{rev}:{name}"))
    root = tmp / "tree" / rel if rel else tmp / "tree"
    if not root.exists():
        raise BadInputError(f"{rev}:{rel} holds no .yaml/.yml config files")
    return root


def _side(label: str, root: Path) -> Side:
    config = load_config(root, torch_root=PLACEHOLDER_ROOT)
    caps: set[str] = set()
    for file in config_files(root):
        doc, _ = load_model(file, ConfigDocument)
        caps |= capability_lines(doc.test_suite_config.global_)
    return Side(label, root if root.is_dir() else root.parent, config, frozenset(caps))


# --- describing -----------------------------------------------------------------------------
def capability_lines(caps: Capabilities | None) -> set[str]:
    """Capabilities as comparable lines; None (undeclared) and [] differ and show so."""
    out: set[str] = set()
    if caps is None:
        return out
    if caps.supported_dtypes is not None:
        out |= {f"supported_dtypes {d.name}" for d in caps.supported_dtypes} or {"supported_dtypes (none)"}
    if caps.supported_ops is not None:
        for op in caps.supported_ops:
            dts = f" [{', '.join(sorted(d.name for d in op.dtypes))}]" if op.dtypes is not None else ""
            out.add(f"supported_ops {op.name}{dts}")
        out |= set() if caps.supported_ops else {"supported_ops (none)"}
    return out


def edit_items(edits: Edits | None) -> tuple[str, ...]:
    """Edits as comparable items: ``exclude dtype bool``, ``include dtype bfloat16``,
    ``exclude op sub``, ``exclude op add[float32]``, ``exclude module nn.Linear``,
    ``exclude param shape=2x3``."""
    if edits is None:
        return ()
    items = []
    if edits.dtypes is not None:
        items += [f"exclude dtype {d.name}" for d in edits.dtypes.exclude]
        items += [f"include dtype {d.name}" for d in edits.dtypes.include]
    if edits.ops is not None:
        items += [f"exclude op {o.name}" + (f"[{', '.join(sorted(d.name for d in o.dtypes))}]" if o.dtypes else "")
                  for o in edits.ops.exclude]
    if edits.modules is not None:
        items += [f"exclude module {m.name}" for m in edits.modules.exclude]
    if edits.params is not None:
        items += [f"exclude param {p.name}={v}" for p in edits.params.exclude for v in p.values]
    return tuple(sorted(items))


def edits_text(edits: Edits | None) -> str | None:
    """``dtypes -bool +bfloat16; ops -sub -add[float32]`` (sorted)."""
    if edits is None:
        return None
    parts = []
    if edits.dtypes is not None:
        items = [f"-{d.name}" for d in edits.dtypes.exclude] + [f"+{d.name}" for d in edits.dtypes.include]
        parts.append("dtypes " + " ".join(sorted(items)))
    if edits.ops is not None:
        ops = [f"-{o.name}" + (f"[{', '.join(sorted(d.name for d in o.dtypes))}]" if o.dtypes else "") for o in edits.ops.exclude]
        parts.append("ops " + " ".join(sorted(ops)))
    if edits.modules is not None:
        parts.append("modules " + " ".join(sorted(f"-{m.name}" for m in edits.modules.exclude)))
    if edits.params is not None:
        parts.append("params " + " ".join(sorted(f"-{p.name}={v}" for p in edits.params.exclude for v in p.values)))
    return "; ".join(p for p in parts if p.strip()) or None


def _where(side: Side, entry: ResolvedEntry) -> str:
    loc = entry.location
    try:
        rel = Path(loc.file).relative_to(side.root).as_posix()
    except ValueError:
        rel = Path(loc.file).name
    return f"{rel}:{loc.line}" if loc.line else rel


# --- diffing --------------------------------------------------------------------------------
def _entries(file: ResolvedFile | None) -> dict[str, ResolvedEntry]:
    return {n: e for e in file.entries for n in e.names} if file is not None else {}


def _test_change(name: str, old: Side, new: Side, of: ResolvedFile | None, nf: ResolvedFile | None) -> TestChange | None:
    oe, ne = _entries(of).get(name), _entries(nf).get(name)
    aspects = []
    if oe is not None and ne is not None:
        aspects = [a for a, x, y in (("mode", oe.mode, ne.mode), ("edits", edits_text(oe.edits), edits_text(ne.edits)),
                                     ("reason", oe.reason, ne.reason)) if x != y]
        if not aspects:
            return None
    kind = "added" if oe is None else "removed" if ne is None else "changed"
    old_effective = oe.mode if oe else (of.unlisted_test_mode if of else "absent")
    new_effective = ne.mode if ne else (nf.unlisted_test_mode if nf else "absent")
    old_items, new_items = set(edit_items(oe.edits if oe else None)), set(edit_items(ne.edits if ne else None))
    return TestChange(
        name=name, kind=kind, aspects=tuple(aspects),
        old_mode=oe.mode if oe else None, new_mode=ne.mode if ne else None,
        old_effective=old_effective, new_effective=new_effective,
        old_reason=oe.reason if oe else None, new_reason=ne.reason if ne else None,
        old_edits=edits_text(oe.edits) if oe else None, new_edits=edits_text(ne.edits) if ne else None,
        old_where=_where(old, oe) if oe else None, new_where=_where(new, ne) if ne else None,
        edits_added=tuple(sorted(new_items - old_items)), edits_removed=tuple(sorted(old_items - new_items)),
        lost_mandatory=old_effective == "mandatory_success" and new_effective != "mandatory_success",
        stale_reason="mode" in aspects and "reason" not in aspects and bool(ne and ne.reason),
        old_excerpt=old.excerpt(oe) if oe else (), new_excerpt=new.excerpt(ne) if ne else (),
    )


def _file_change(raw: str, old: Side, new: Side, global_diff: set[str]) -> FileChange | None:
    of = next((f for f in old.config.files if f.raw_path == raw), None)
    nf = next((f for f in new.config.files if f.raw_path == raw), None)
    names = sorted(set(_entries(of)) | set(_entries(nf)))
    tests = tuple(c for c in (_test_change(n, old, new, of, nf) for n in names) if c is not None)
    oc = capability_lines(of.capabilities) if of else set()
    nc = capability_lines(nf.capabilities) if nf else set()
    caps = {f"- {c}" for c in oc - nc} | {f"+ {c}" for c in nc - oc}
    caps = tuple(sorted(caps - global_diff, key=lambda s: (s[2:], s[0]))) if of and nf else ()
    old_unlisted = of.unlisted_test_mode if of else None
    new_unlisted = nf.unlisted_test_mode if nf else None
    if of and nf and not tests and not caps and old_unlisted == new_unlisted:
        return None
    kind = "added" if of is None else "removed" if nf is None else "changed"
    return FileChange(raw, kind, old_unlisted, new_unlisted, caps, tests)


def _summary(old: Side, new: Side, files: tuple[FileChange, ...]) -> Summary:
    def counts(side: Side) -> dict[str, int]:
        c = Counter(e.mode for f in side.config.files for e in f.entries for _ in e.names)
        return {m: c.get(m, 0) for m in MODES_BY_STRICTNESS}

    tests = [t for f in files for t in f.tests]
    moves = Counter(f"{t.old_effective} -> {t.new_effective}" for t in tests if t.old_effective != t.new_effective)
    lost = tuple(f"{f.raw_path}::{t.name}" for f in files for t in f.tests if t.lost_mandatory)
    kinds = Counter(t.kind for t in tests)
    before = counts(old)
    narrowed = tuple(f"{f.raw_path}::{t.name}" for f in files for t in f.tests
                     if t.old_effective == t.new_effective == "mandatory_success"
                     and any(item.startswith("exclude ") for item in t.edits_added))
    return Summary(before, counts(new), dict(sorted(moves.items())), kinds["added"], kinds["removed"],
                   kinds["changed"], before["mandatory_success"], len(lost), lost,
                   sum(1 for t in tests if t.stale_reason), narrowed)


def review(old: Side, new: Side) -> ReviewReport:
    """The full diff of ``old`` -> ``new``; every list sorted, so renderings are stable."""
    gdiff = {f"- {c}" for c in old.global_caps - new.global_caps} | {f"+ {c}" for c in new.global_caps - old.global_caps}
    global_changes = sorted(gdiff, key=lambda s: (s[2:], s[0]))
    if old.config.unlisted_file_mode != new.config.unlisted_file_mode:
        global_changes.append(f"unlisted_file_mode {old.config.unlisted_file_mode} -> {new.config.unlisted_file_mode}")
    for label in sorted(set(old.config.labels) ^ set(new.config.labels)):
        global_changes.append(f"{'+' if label in new.config.labels else '-'} label {label}")
    raws = sorted({f.raw_path for f in old.config.files} | {f.raw_path for f in new.config.files})
    files = tuple(c for c in (_file_change(r, old, new, gdiff) for r in raws) if c is not None)
    notes = tuple(f"{f.raw_path}: unlisted_test_mode {f.old_unlisted} -> {f.new_unlisted} changes every test the file "
                  "does not list (not counted above)" for f in files
                  if f.kind == "changed" and f.old_unlisted != f.new_unlisted)
    return ReviewReport(old.label, new.label, tuple(global_changes), files, _summary(old, new, files), notes)


def review_paths(old: str, new: str, repo: Path | None = None) -> ReviewReport:
    with open_side(old, repo) as o, open_side(new, repo) as n:
        return review(o, n)


def changed_tests(report: ReviewReport) -> list[str]:
    """Every changed test as ``raw_path::Class::test``, in the report's order."""
    return [f"{f.raw_path}::{t.name}" for f in report.files for t in f.tests]


def by_cause(report: ReviewReport) -> list[tuple[str, list[str]]]:
    """The changed tests grouped by their cause, largest group first (empty without causes)."""
    groups: dict[str, list[str]] = {}
    for test, cause in report.causes:
        groups.setdefault(cause, []).append(test)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def shrink_exceeds(report: ReviewReport, threshold: str) -> str | None:
    """``threshold`` is a count (``5``) or a percent (``10%``) of the named mandatory_success
    tests before; returns the failure message when more than that shrank: lost the mode, or
    kept it with a new exclusion (fewer of its instances must pass)."""
    text = threshold.strip()
    try:
        limit = float(text[:-1]) if text.endswith("%") else int(text)
    except ValueError as exc:
        raise BadInputError(f"threshold {threshold!r} is not a count (5) or a percent (10%)") from exc
    s = report.summary
    shrank = s.mandatory_lost + len(s.narrowed_tests)
    what = f"{s.mandatory_lost} lost the mode, {len(s.narrowed_tests)} gained an exclusion"
    if text.endswith("%"):
        pct = 100.0 * shrank / s.mandatory_before if s.mandatory_before else 0.0
        if pct > limit:
            return f"mandatory_success shrank by {shrank} of {s.mandatory_before} tests ({what}; {pct:.1f}% > {text})"
        return None
    if shrank > limit:
        return f"mandatory_success shrank by {shrank} tests ({what}; > {text})"
    return None
