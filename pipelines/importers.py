"""Import other teams' skip lists into our config, with an exactness report.

Two formats:

* an intel/torch-xpu-ops style skip list: a Python file holding ``skip_dict = {file:
  (pattern, ...) | None}``. It is read as data (``ast``; string constants, ``+`` and
  module-level string names only), never executed. Their runner turns each file's
  patterns into ``pytest -k 'not p1 and not p2 ...'``, so a pattern deselects every test
  any of whose keywords (test name, class, module, folder, marker names) contains it,
  case-insensitively. ``None`` means "run the whole file". Keys name their wrapper files
  (``test_torch_xpu.py``); the upstream file is the key without ``strip_suffix``.
* PyTorch's disabled-tests JSON (see :mod:`testcurator.pipelines.exporters` for its rule).

Both are matched against the real collected tests (:mod:`testcurator.runner.collect`), and
each match becomes an entry naming generic tests: a generic test all of whose instances
matched gets ``mode``; when only some did, and ``mode`` is skip, a ``dtypes``/``ops``
exclusion expresses exactly those instances (checked with the plugin's own edit logic),
else the whole test gets ``mode`` and the report calls it *widened*. Tests no pattern
matched keep ``unlisted_test_mode`` (default mandatory_success: the list said "run").
Both formats are read by :mod:`testcurator.pipelines.skiplist_readers`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from testcurator.config.editor import ConfigEditor, EntrySpec
from testcurator.errors import BadInputError
from testcurator.names import split_device_class, split_dtypes
from testcurator.pipelines.exporters import key_matches, parse_key
from testcurator.pipelines.skiplist_readers import Pattern, read_disabled_tests, read_skip_list
from testcurator.runner.collect import CollectedTest, collect

@dataclass(frozen=True)
class PatternRow:
    """One line of the exactness report."""

    file: str
    pattern: str
    kind: str  # exact | substring | unmatched
    instances: tuple[str, ...]
    generic: tuple[tuple[str, str], ...]  # (generic name, "full" | "k/M")
    via_keyword: bool = False  # matched through a class/module/folder name, not the test name


@dataclass
class ImportReport:
    """Exactness of an import: per pattern, and per generic test decided."""

    source: str
    rows: list[PatternRow] = field(default_factory=list)
    decisions: list[tuple[str, str, str]] = field(default_factory=list)  # (file, generic, how)
    missing_files: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "patterns": [{"file": r.file, "pattern": r.pattern, "kind": r.kind, "via_keyword": r.via_keyword,
                          "instances": list(r.instances), "generic": [list(g) for g in r.generic]} for r in self.rows],
            "decisions": [list(d) for d in self.decisions],
            "missing_files": self.missing_files,
            "written": self.written,
        }


# --- matching ---------------------------------------------------------------------------
class SubstringMatcher:
    """pytest ``-k`` identifier semantics: case-insensitive substring of any keyword.

    ``as_device``: the list was written for that device (``xpu``) while collection here
    instantiates for another (``cpu``); the device's name in a pattern is rewritten to the
    collected test's device before matching.
    """

    def __init__(self, as_device: str | None = None) -> None:
        self.as_device = as_device.lower() if as_device else None

    def needle(self, pattern: str, test: CollectedTest) -> str:
        needle = pattern.lower()
        if self.as_device and test.device and self.as_device != test.device.lower():
            needle = needle.replace(self.as_device, test.device.lower())
        return needle

    def __call__(self, pattern: str, test: CollectedTest) -> bool:
        needle = self.needle(pattern, test)
        return any(needle in kw.lower() for kw in test.keywords)

    def kind(self, pattern: str, matched: Sequence[CollectedTest]) -> tuple[str, bool]:
        """(exact | substring, whether any hit came through a non-test-name keyword)."""
        via = any(self.needle(pattern, t) not in t.name.lower() for t in matched)
        exact = len(matched) == 1 and self.needle(pattern, matched[0]) in (matched[0].name.lower(), matched[0].instance.lower())
        return ("exact" if exact else "substring"), via


class DisabledKeyMatcher:
    """PyTorch's disabled-test rule; kinds: exact, suffix-stripped (all dtypes), class-prefix."""

    def __call__(self, pattern: str, test: CollectedTest) -> bool:
        return key_matches(parse_key(pattern), test)

    def kind(self, pattern: str, matched: Sequence[CollectedTest]) -> tuple[str, bool]:
        key = parse_key(pattern)
        same_class = all(key.cls in (t.cls, split_device_class(t.cls)[0]) for t in matched)
        if not same_class:
            return "class-prefix", True
        return ("exact" if all(t.name == key.test for t in matched) else "suffix-stripped"), False


Matcher = SubstringMatcher | DisabledKeyMatcher


def match_patterns(file: str, patterns: Sequence[Pattern], tests: Sequence[CollectedTest],
                   matcher: Matcher) -> tuple[list[PatternRow], dict[str, set[str]]]:
    """Per pattern, its report row; and per pattern text, the node ids it matched."""
    by_generic: dict[str, list[CollectedTest]] = {}
    for t in tests:
        by_generic.setdefault(t.generic, []).append(t)
    rows, hits = [], {}
    for pattern in patterns:
        matched = [t for t in tests if matcher(pattern.text, t)]
        hits[pattern.text] = {t.nodeid for t in matched}
        kind, via = matcher.kind(pattern.text, matched) if matched else ("unmatched", False)
        generic = []
        for g in sorted({t.generic for t in matched}):
            k, m = sum(1 for t in by_generic[g] if t.nodeid in hits[pattern.text]), len(by_generic[g])
            generic.append((g, "full" if k == m else f"{k}/{m}"))
        rows.append(PatternRow(file, pattern.text, kind, tuple(sorted(t.instance for t in matched)), tuple(generic), via))
    return rows, hits


# --- planning entries -------------------------------------------------------------------
def _ids(tests: Sequence[CollectedTest]) -> set[str]:
    return {t.nodeid for t in tests}


def exclusion_edit(instances: Sequence[CollectedTest], matched: set[str]) -> dict[str, Any] | None:
    """A dtypes/ops exclusion that skips exactly the ``matched`` instances, or None."""
    hit = [t for t in instances if t.nodeid in matched]
    if any(t.op for t in instances):
        refs = []
        for op in sorted({t.op for t in hit if t.op}):
            of_op = [t for t in instances if t.op == op]
            dts = sorted({t.dtype for t in hit if t.op == op and t.dtype})
            full = all(t.nodeid in matched for t in of_op)
            refs.append({"name": op} if full else {"name": op, "dtypes": [{"name": d} for d in dts]})
        candidate: dict[str, Any] = {"ops": {"exclude": refs}}
    else:
        candidate = {"dtypes": {"exclude": [{"name": d} for d in _dtypes_of(hit)]}}
    return candidate if _expresses(candidate, instances, matched) else None


def _dtypes_of(hit: Sequence[CollectedTest]) -> list[str]:
    """The dtypes to exclude: each instance's own, or for dtype pairs
    (``complex128_float32``) the members every matched instance shares."""
    parts = [set(split_dtypes(t.dtype)) for t in hit if t.dtype]
    if all(len(p) == 1 for p in parts):
        return sorted(set().union(*parts))
    return sorted(set.intersection(*parts)) if parts else []


def _expresses(candidate: dict[str, Any], instances: Sequence[CollectedTest], matched: set[str]) -> bool:
    # Checked with the plugin's own edit logic, so "exact" means what the plugin will do.
    from pydantic import ValidationError

    from testcurator.config.apply import excluded_by_edit
    from testcurator.config.schema import Edits
    from testcurator.names import TestIdentity

    try:
        edits = Edits.model_validate(candidate)
    except ValidationError:
        return False
    for t in instances:
        ident = TestIdentity(cls="", test=t.name, device=t.device, dtype=t.dtype, op=t.op, module=t.module)
        if (excluded_by_edit(edits, ident) is not None) != (t.nodeid in matched):
            return False
    return True


def plan_entries(source: str, file_key: str, patterns: Sequence[Pattern], tests: Sequence[CollectedTest],
                 hits: dict[str, set[str]], mode: str, unlisted_mode: str,
                 report: ImportReport) -> list[EntrySpec]:
    """Entries for one upstream file, grouped by (patterns, mode, edits); sorted."""
    by_generic: dict[str, list[CollectedTest]] = {}
    for t in tests:
        by_generic.setdefault(t.generic, []).append(t)
    matched = set().union(*hits.values()) if hits else set()
    groups: dict[tuple[tuple[str, ...], str, str], list[str]] = {}
    notes: dict[str, str] = {}
    for generic in sorted(by_generic):
        inst = by_generic[generic]
        hit = _ids(inst) & matched
        if not hit:
            continue
        pats = tuple(p.text for p in patterns if hits[p.text] & hit)
        edits, how = None, "full"
        entry_mode = mode
        if len(hit) < len(inst):
            edits = exclusion_edit(inst, hit) if mode == "skip" else None
            if edits is not None:
                entry_mode, how = unlisted_mode, f"edit ({len(hit)}/{len(inst)} instances excluded)"
            else:
                how = f"widened ({len(hit)}/{len(inst)} instances matched; the whole test gets {mode})"
                notes[generic] = how
        report.decisions.append((file_key, generic, how))
        groups.setdefault((pats, entry_mode, json.dumps(edits, sort_keys=True)), []).append(generic)
    specs = []
    for (pats, entry_mode, edits_json), names in sorted(groups.items(), key=lambda kv: sorted(kv[1])[0]):
        inst_ids = set().union(*(_ids(by_generic[n]) for n in names))
        lines = [f"imported from {source} ({file_key}): pattern {p!r} matched {len(hits[p] & inst_ids)}"
                 f" instantiated tests of {len(inst_ids)}" for p in pats]
        lines += [f"their note on {p.text!r}: {p.comment}" for p in patterns if p.text in pats and p.comment]
        lines += [f"{n}: {notes[n]}" for n in names if n in notes]
        specs.append(EntrySpec(tuple(sorted(names)), entry_mode, "\n".join(lines), json.loads(edits_json)))
    return specs


# --- the two imports --------------------------------------------------------------------
def config_name(upstream: str, test_dir: str = "test") -> str:
    """``test/nn/test_x.py`` -> ``nn.test_x.yaml`` (one config per upstream file)."""
    rel = PurePosixPath(upstream)
    if rel.parts and rel.parts[0] == test_dir:
        rel = PurePosixPath(*rel.parts[1:])
    return ".".join(rel.with_suffix("").parts) + ".yaml"


def _write(out_dir: Path, planned: list[tuple[str, str, list[EntrySpec]]], header: str, force: bool,
           test_dir: str) -> list[str]:
    targets = [(out_dir / config_name(up, test_dir), up, mode, specs) for up, mode, specs in planned]
    existing = sorted(str(t) for t, *_ in targets if t.exists())
    if existing and not force:
        raise BadInputError(f"refusing to replace existing config(s) (use --force): {', '.join(existing)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    for target, upstream, mode, specs in targets:
        editor = ConfigEditor.new(target, header=header)
        raw = "${TORCH_ROOT}/" + upstream
        editor.ensure_file(raw, mode)
        if specs:
            editor.update(raw, specs, unlisted_test_mode=mode)
        editor.original = ""  # always write: --force replaces whatever was there
        editor.save()
    return sorted(t.name for t, *_ in targets)


def _collect(torch_root: Path, upstreams: Sequence[str], collected: Sequence[CollectedTest] | None,
             report: ImportReport) -> dict[str, list[CollectedTest]]:
    present = [u for u in upstreams if (torch_root / u).is_file()]
    report.missing_files = sorted(set(upstreams) - set(present))
    if collected is None:
        collected = collect(sorted({torch_root / u for u in present}), rootdir=torch_root)
    by_file: dict[str, list[CollectedTest]] = {u: [] for u in present}
    real = {os.path.realpath(torch_root / u): u for u in present}
    for t in collected:
        if t.file in real:
            by_file[real[t.file]].append(t)
    return by_file


def import_skip_list(path: Path, *, torch_root: Path, out_dir: Path, mode: str = "skip",
                     unlisted_mode: str = "mandatory_success", strip_suffix: str = "_xpu", test_dir: str = "test",
                     as_device: str | None = None, force: bool = False,
                     collected: Sequence[CollectedTest] | None = None) -> ImportReport:
    """Import an xpu-ops skip list into configs under ``out_dir``; returns the exactness report."""
    files = read_skip_list(path, strip_suffix=strip_suffix, test_dir=test_dir)
    report = ImportReport(path.name)
    by_file = _collect(torch_root, [f.upstream for f in files], collected, report)
    matcher = SubstringMatcher(as_device)
    planned = []
    for f in files:
        if f.upstream not in by_file:
            continue
        rows, hits = match_patterns(f.upstream, f.patterns, by_file[f.upstream], matcher)
        report.rows.extend(rows)
        planned.append((f.upstream, unlisted_mode, plan_entries(path.name, f.key, f.patterns, by_file[f.upstream],
                                                                 hits, mode, unlisted_mode, report)))
    header = f"Imported by testcurator from the skip list {path.name}; reasons say which pattern led to each entry."
    report.written = _write(out_dir, planned, header, force, test_dir)
    return report


def import_disabled_tests(path: Path, *, torch_root: Path, out_dir: Path, test_files: Sequence[str] = (),
                          mode: str = "skip", unlisted_mode: str = "mandatory_success", platform: str | None = None,
                          test_dir: str = "test", force: bool = False,
                          collected: Sequence[CollectedTest] | None = None) -> ImportReport:
    """Import PyTorch's disabled-tests JSON; keys are matched in ``test_files`` (relative to
    the torch root) and in ``test/<module>.py`` for keys that name their module."""
    patterns = read_disabled_tests(path, platform=platform)
    modules = {parse_key(p.text).module for p in patterns} - {None, "__main__"}
    upstreams = sorted(set(test_files) | {f"{test_dir}/{m.replace('.', '/')}.py" for m in modules if m})
    report = ImportReport(path.name)
    by_file = _collect(torch_root, upstreams, collected, report)
    matcher = DisabledKeyMatcher()
    planned, anywhere = [], set()
    for upstream, tests in sorted(by_file.items()):
        rows, hits = match_patterns(upstream, patterns, tests, matcher)
        report.rows.extend(r for r in rows if r.kind != "unmatched")
        anywhere |= {r.pattern for r in rows if r.kind != "unmatched"}
        planned.append((upstream, unlisted_mode, plan_entries(path.name, upstream, patterns, tests, hits, mode,
                                                              unlisted_mode, report)))
    report.rows.extend(PatternRow("-", p.text, "unmatched", (), ()) for p in patterns if p.text not in anywhere)
    header = f"Imported by testcurator from the disabled-tests JSON {path.name}."
    report.written = _write(out_dir, planned, header, force, test_dir)
    return report


def report_markdown(report: ImportReport) -> str:
    """The exactness report as a markdown table (stable order)."""
    out = [f"# Import of {report.source}", "", "| file | pattern | kind | instances | generic tests (coverage) |",
           "|---|---|---|---:|---|"]
    for r in sorted(report.rows, key=lambda r: (r.file, r.pattern)):
        kind = r.kind + (" (via class/module name)" if r.via_keyword else "")
        gen = ", ".join(f"`{g}` {c}" for g, c in r.generic) or "-"
        out.append(f"| {r.file} | `{r.pattern}` | {kind} | {len(r.instances)} | {gen} |")
    kinds = {k: sum(1 for r in report.rows if r.kind == k) for k in sorted({r.kind for r in report.rows})}
    out += ["", "Patterns by kind: " + (", ".join(f"{k} {v}" for k, v in kinds.items()) or "none")]
    widened = [d for d in report.decisions if d[2].startswith("widened")]
    out += [f"Generic tests decided: {len(report.decisions)} ({len(widened)} widened)"]
    out += [f"- widened: {f} `{g}`: {how}" for f, g, how in sorted(widened)]
    out += [f"- upstream file missing: {m}" for m in report.missing_files]
    return "\n".join(out) + "\n"
