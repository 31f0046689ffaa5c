"""Import other teams' skip lists into our config, with an exactness report.

Two formats:

* an intel/torch-xpu-ops style skip list: a Python file holding ``skip_dict = {file:
  (pattern, ...) | None}``. It is read as data (``ast``; string constants, ``+`` and
  module-level string names only), never executed. Their runner turns each file's
  patterns into ``pytest -k 'not p1 and not p2 ...'``, so a pattern deselects every test
  any of whose keywords (test name, class, module, folder, marker names) contains it,
  case-insensitively. ``None`` means "run the whole file". Keys name their wrapper files
  (``test_torch_xpu.py``); the upstream file is the key without ``strip_suffix``.
* PyTorch's disabled-tests JSON (see :mod:`testcurator.pipelines.migrate.exporters` for its rule).

Both are matched against the real collected tests (:mod:`testcurator.runner.collect`), and
each match becomes an entry naming generic tests: a generic test all of whose instances
matched gets ``mode``; when only some did, and ``mode`` is skip, a ``dtypes``/``ops``
exclusion expresses exactly those instances (checked with the plugin's own edit logic),
else the whole test gets ``mode`` and the report calls it *widened*. Tests no pattern
matched keep ``unlisted_test_mode`` (default mandatory_success: the list said "run").
Both formats are read by :mod:`testcurator.pipelines.migrate.readers`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from testcurator.config.editor import ConfigEditor, EntrySpec
from testcurator.config.levels import level2_problems
from testcurator.config.upstream_names import defined_tests
from testcurator.errors import BadInputError
from testcurator.names import split_dtypes
from testcurator.pipelines.migrate.exporters import parse_key
from testcurator.pipelines.migrate.match import (DeviceOnly, DisabledKeyMatcher, PatternRow, SubstringMatcher,
                                                guess_device, match_patterns)
from testcurator.pipelines.migrate.report import ImportReport, LoadError, MissingFile, substring_flag
from testcurator.pipelines.migrate.readers import Pattern, read_disabled_tests, read_skip_list
from testcurator.runner.collect import CollectedTest, collect_files

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


def _add_device_only(edit: dict[str, Any] | None, items: Sequence[DeviceOnly]) -> dict[str, Any]:
    """``edit`` plus the exclusions of variants only the device has (not checkable here)."""
    out: dict[str, Any] = json.loads(json.dumps(edit or {}))
    for item in items:
        if item.op:
            refs = out.setdefault("ops", {}).setdefault("exclude", [])
            ref = next((r for r in refs if r["name"] == item.op), None)
            if ref is None:
                refs.append({"name": item.op, "dtypes": [{"name": d} for d in item.dtypes]})
            elif "dtypes" in ref:  # a ref without dtypes already excludes the whole op
                ref["dtypes"] = [{"name": d} for d in sorted({x["name"] for x in ref["dtypes"]} | set(item.dtypes))]
        else:
            refs = out.setdefault("dtypes", {}).setdefault("exclude", [])
            refs[:] = [{"name": d} for d in sorted({x["name"] for x in refs} | set(item.dtypes))]
    return out


def _resolution(row: PatternRow, names: Sequence[str]) -> str:
    if row.kind == "device-only":
        return row.reason
    cover = [f"all instances of {g}" if c == "full" else f"{c.replace('/', ' of ')} instances of {g}"
             for g, c in row.generic if g in names]
    return f"{row.kind}: {', '.join(cover)}"


def _reason(source: str, file_key: str, names: Sequence[str], pats: Sequence[str], patterns: Sequence[Pattern],
            rows: dict[str, PatternRow], notes: dict[str, str]) -> str:
    """Their notes, each next to the patterns (and so ops and dtypes) it explains."""
    by_note: dict[str, list[str]] = {}
    for p in patterns:
        if p.text in pats:
            by_note.setdefault(p.comment or "", []).append(
                f"{p.text!r} (line {p.line}: {_resolution(rows[p.text], names)})" if p.line else repr(p.text))
    lines = [f"imported from {source} ({file_key}):"]
    for note, said in by_note.items():
        lines.append(f"{'their note: ' + note if note else 'no note'} -- on {'; '.join(said)}")
    lines += [substring_flag(rows[p]) for p in pats if rows[p].kind == "substring"]
    lines += [f"{n}: {notes[n]}" for n in names if n in notes]
    return "\n".join(lines)


def plan_entries(source: str, file_key: str, patterns: Sequence[Pattern], tests: Sequence[CollectedTest],
                 hits: dict[str, set[str]], mode: str, unlisted_mode: str, report: ImportReport,
                 rows: Sequence[PatternRow]) -> list[EntrySpec]:
    """Entries for one upstream file, grouped by (patterns, mode, edits); sorted."""
    by_generic: dict[str, list[CollectedTest]] = {}
    for t in tests:
        by_generic.setdefault(t.generic, []).append(t)
    by_row = {r.pattern: r for r in rows}
    device: dict[str, list[tuple[str, DeviceOnly]]] = {}
    for r in rows:
        if r.device_only is not None:
            device.setdefault(r.device_only.generic, []).append((r.pattern, r.device_only))
    matched = set().union(*hits.values()) if hits else set()
    groups: dict[tuple[tuple[str, ...], str, str], list[str]] = {}
    notes: dict[str, str] = {}
    for generic in sorted(set(by_generic) | set(device)):
        inst = by_generic.get(generic, [])
        hit, extra = _ids(inst) & matched, device.get(generic, [])
        if not hit and not extra:
            continue
        pats = tuple(p.text for p in patterns if hits[p.text] & hit or any(p.text == q for q, _ in extra))
        edits, how, entry_mode = None, "full", mode
        dev = f", {len(extra)} device-only variant(s)" if extra else ""
        whole = (inst and len(hit) == len(inst)) or any(not d.dtypes for _, d in extra)
        if not whole:
            edits = exclusion_edit(inst, hit) if mode == "skip" and hit else None
            if mode == "skip" and (edits is not None or not hit):
                edits = _add_device_only(edits, [d for _, d in extra])
                entry_mode = unlisted_mode
                how = f"edit ({len(hit)}/{len(inst)} instances excluded{dev})"
            else:
                edits = None
                how = f"widened ({len(hit)}/{len(inst)} instances matched{dev}; the whole test gets {mode})"
                notes[generic] = how
        report.decisions.append((file_key, generic, how))
        groups.setdefault((pats, entry_mode, json.dumps(edits, sort_keys=True)), []).append(generic)
    specs = []
    for (pats, entry_mode, edits_json), names in sorted(groups.items(), key=lambda kv: sorted(kv[1])[0]):
        names = sorted(names)
        reason = _reason(source, file_key, names, pats, patterns, by_row, notes)
        specs.append(EntrySpec(tuple(names), entry_mode, reason, json.loads(edits_json)))
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


def _collect(torch_root: Path, counts: dict[str, int | None], collected: Sequence[CollectedTest] | None,
             report: ImportReport) -> dict[str, list[CollectedTest]]:
    """The tests of every listed file the tree has and that loads (``counts``: patterns per
    file, None for a whole-file key); the others go into the report."""
    present = [u for u in counts if (torch_root / u).is_file()]
    report.missing = [MissingFile(u, counts[u] or 0, counts[u] is None) for u in sorted(set(counts) - set(present))]
    errors = []
    if collected is None:
        result = collect_files(sorted({torch_root / u for u in present}), rootdir=torch_root)
        collected, errors = result.tests, result.errors
    real = {os.path.realpath(torch_root / u): u for u in present}
    for e in errors:
        upstream = real.get(e.file, e.nodeid)
        report.load_errors.append(LoadError(upstream, e.summary, e.head, counts.get(upstream) or 0))
    failed = {e.file for e in report.load_errors}
    by_file: dict[str, list[CollectedTest]] = {u: [] for u in present if u not in failed}
    for t in collected:
        if t.file in real and real[t.file] in by_file:
            by_file[real[t.file]].append(t)
    return by_file


def _validate_written(report: ImportReport, out_dir: Path, torch_root: Path) -> None:
    paths = [out_dir / name for name in report.written]
    report.validation = [str(p) for p in level2_problems(paths, torch_root=torch_root)] if paths else []


def import_skip_list(path: Path, *, torch_root: Path, out_dir: Path, mode: str = "skip",
                     unlisted_mode: str = "mandatory_success", strip_suffix: str = "_xpu", test_dir: str = "test",
                     as_device: str | None = None, force: bool = False,
                     collected: Sequence[CollectedTest] | None = None) -> ImportReport:
    """Import an xpu-ops skip list into configs under ``out_dir``; returns the exactness report.

    Without ``as_device``, a device most patterns name (``_xpu``) is inferred, and the report
    says so. A file that does not load is reported with its patterns; the rest is imported.
    """
    skip_list = read_skip_list(path, strip_suffix=strip_suffix, test_dir=test_dir)
    report = ImportReport(path.name, unreadable=[str(p) for p in skip_list.unreadable])
    counts: dict[str, int | None] = {}  # None: only whole-file keys (nothing to skip)
    for f in skip_list.files:
        if f.patterns:
            counts[f.upstream] = (counts.get(f.upstream) or 0) + len(f.patterns)
        else:
            counts.setdefault(f.upstream, None)
    by_file = _collect(torch_root, counts, collected, report)
    report.rows.extend(PatternRow(e.file, p.text, "not-loaded", (), (), reason=f"the file did not load: {e.summary}")
                       for e in report.load_errors for f in skip_list.files if f.upstream == e.file for p in f.patterns)
    if as_device is None:
        guess = guess_device([p.text for f in skip_list.files if f.upstream in by_file for p in f.patterns])
        if guess is not None:
            as_device = guess[0]
            report.notes.append(f"inferred --as-device {as_device}: {guess[1]} of the patterns name it "
                                "(pass --as-device cpu to match them as written)")
    matcher = SubstringMatcher(as_device)
    planned = []
    for f in skip_list.files:
        if f.upstream not in by_file:
            continue
        tests = by_file[f.upstream]
        rows, hits = match_patterns(f.upstream, f.patterns, tests, matcher, defined_tests(torch_root / f.upstream))
        report.rows.extend(rows)
        planned.append((f.upstream, unlisted_mode, plan_entries(path.name, f.key, f.patterns, tests, hits, mode,
                                                                 unlisted_mode, report, rows)))
    header = f"Imported by testcurator from the skip list {path.name}; reasons say which pattern led to each entry."
    report.written = _write(out_dir, planned, header, force, test_dir)
    _validate_written(report, out_dir, torch_root)
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
    module_file = [f"{test_dir}/{(parse_key(p.text).module or '').replace('.', '/')}.py" for p in patterns]
    counts: dict[str, int | None] = {u: module_file.count(u) for u in upstreams}
    by_file = _collect(torch_root, counts, collected, report)
    matcher = DisabledKeyMatcher()
    planned, anywhere = [], set()
    for upstream, tests in sorted(by_file.items()):
        rows, hits = match_patterns(upstream, patterns, tests, matcher)
        placed = [r for r in rows if r.kind != "unmatched"]
        report.rows.extend(placed)
        anywhere |= {r.pattern for r in placed}
        planned.append((upstream, unlisted_mode, plan_entries(path.name, upstream, patterns, tests, hits, mode,
                                                              unlisted_mode, report, placed)))
    report.rows.extend(PatternRow("-", p.text, "unmatched", (), (), reason="no collected test has this name")
                       for p in patterns if p.text not in anywhere)
    header = f"Imported by testcurator from the disabled-tests JSON {path.name}."
    report.written = _write(out_dir, planned, header, force, test_dir)
    _validate_written(report, out_dir, torch_root)
    return report
