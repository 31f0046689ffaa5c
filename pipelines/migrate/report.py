"""The report of a skip-list import: per pattern how exactly it was placed, and what was not.

Printed as markdown (``report_markdown``) and ends in one summary line; ``--report x.json``
writes :meth:`ImportReport.as_dict`. :func:`unplaced_exceeds` decides the exit status: 1 when
more patterns than the threshold could not be placed in files the tree has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from testcurator.errors import BadInputError
from testcurator.pipelines.migrate.match import PatternRow

PLACED_KINDS = ("exact", "substring", "device-only", "suffix-stripped", "class-prefix")


@dataclass(frozen=True)
class LoadError:
    """An upstream file that did not collect: its patterns are listed, not placed."""

    file: str
    summary: str  # the exception pytest reported
    head: str  # the start of pytest's report
    patterns: int


@dataclass(frozen=True)
class MissingFile:
    """A file the list names that the tree does not have."""

    file: str
    patterns: int
    whole_file: bool  # the list's value was None: "run the whole file", nothing to skip


@dataclass
class ImportReport:
    """Exactness of an import: per pattern, and per generic test decided."""

    source: str
    rows: list[PatternRow] = field(default_factory=list)
    decisions: list[tuple[str, str, str]] = field(default_factory=list)  # (file, generic, how)
    missing: list[MissingFile] = field(default_factory=list)
    load_errors: list[LoadError] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # keys/patterns of the list that are not data
    notes: list[str] = field(default_factory=list)  # what the import decided by itself (an inferred device)
    validation: list[str] = field(default_factory=list)  # level-2 problems of what was written
    written: list[str] = field(default_factory=list)

    @property
    def missing_files(self) -> list[str]:
        return [m.file for m in self.missing]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.rows:
            out[r.kind] = out.get(r.kind, 0) + 1
        return dict(sorted(out.items()))

    @property
    def unplaced(self) -> int:
        """Patterns of files in the tree that no entry carries (unmatched, or their file did not load)."""
        return sum(1 for r in self.rows if r.kind not in PLACED_KINDS)

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {v}" for k, v in self.counts().items()) or "none"
        missing = sum(m.patterns for m in self.missing)
        return (f"{len(self.rows)} pattern(s) in files of the tree: {kinds}; {self.unplaced} not placed; "
                f"{len(self.load_errors)} file(s) did not load; {len(self.missing)} file(s) not in the tree "
                f"({missing} pattern(s)); {len(self.unreadable)} entr(ies) of the list unreadable; "
                f"{len(self.validation)} validation problem(s)")

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "patterns": [{"file": r.file, "pattern": r.pattern, "kind": r.kind, "via_keyword": r.via_keyword,
                          "instances": list(r.instances), "generic": [list(g) for g in r.generic], "reason": r.reason}
                         for r in self.rows],
            "counts": self.counts(),
            "decisions": [list(d) for d in self.decisions],
            "missing_files": [vars(m) for m in self.missing],
            "load_errors": [vars(e) for e in self.load_errors],
            "unreadable": self.unreadable,
            "notes": self.notes,
            "validation": self.validation,
            "written": self.written,
            "summary": self.summary(),
        }


def substring_flag(row: PatternRow) -> str:
    """What a reviewer must decide about a substring pattern (it is frozen into today's names)."""
    names = ", ".join(g for g, _ in row.generic[:8]) + (", ..." if len(row.generic) > 8 else "")
    return (f"NEEDS REVIEW: substring pattern {row.pattern!r} was frozen into today's {len(row.instances)} "
            f"instance(s) of {names}; tests or ops added upstream later are not covered")


def report_markdown(report: ImportReport) -> str:
    """The exactness report as markdown (stable order), ending in the summary line."""
    out = [f"# Import of {report.source}", ""]
    out += [f"- note: {n}" for n in report.notes]
    out += ["", "| file | pattern | kind | instances | generic tests (coverage) | why |", "|---|---|---|---:|---|---|"]
    for r in sorted(report.rows, key=lambda r: (r.file, r.pattern)):
        kind = r.kind + (" (via class/module name)" if r.via_keyword else "")
        gen = ", ".join(f"`{g}` {c}" for g, c in r.generic) or "-"
        out.append(f"| {r.file} | `{r.pattern}` | {kind} | {len(r.instances)} | {gen} | {r.reason or '-'} |")
    widened = [d for d in report.decisions if d[2].startswith("widened")]
    out += ["", f"Generic tests decided: {len(report.decisions)} ({len(widened)} widened)"]
    out += [f"- widened: {f} `{g}`: {how}" for f, g, how in sorted(widened)]
    substrings = [r for r in report.rows if r.kind == "substring"]
    if substrings:
        out += ["", "Substring patterns (a human decides: keep the names below, or widen by hand):"]
        out += [f"- {r.file}: {substring_flag(r)}" for r in substrings]
    if report.load_errors:
        out += ["", "Files that did not load (their patterns are not placed):"]
        for e in report.load_errors:
            out += [f"- {e.file} ({e.patterns} pattern(s)): {e.summary}", "", "  ```",
                    *("  " + line for line in e.head.splitlines()), "  ```"]
    if report.missing:
        whole = [m for m in report.missing if m.whole_file]
        out += ["", f"Files not in this tree: {len(report.missing) - len(whole)} with patterns, "
                    f"{len(whole)} listed as whole-file (None: run everything, nothing to import)"]
        out += [f"- {m.file}: {m.patterns} pattern(s)" for m in report.missing if not m.whole_file]
        out += [f"- {m.file}: whole file" for m in whole]
    if report.unreadable:
        out += ["", "Entries of the list that are not data (skipped):", *(f"- {u}" for u in report.unreadable)]
    out += ["", f"Validation (level 2) of the configs written: {len(report.validation) or 'no'} problem(s)"]
    out += [f"- {v}" for v in report.validation]
    out += ["", report.summary()]
    return "\n".join(out) + "\n"


def parse_threshold(threshold: str) -> tuple[float, bool]:
    """``20`` -> (20, False); ``10%`` -> (10.0, True)."""
    text = threshold.strip()
    try:
        return (float(text[:-1]), True) if text.endswith("%") else (int(text), False)
    except ValueError as exc:
        raise BadInputError(f"threshold {threshold!r} is not a count (20) or a percent (10%)") from exc


def unplaced_exceeds(report: ImportReport, threshold: str) -> str | None:
    """``threshold`` is a count (``20``) or a percent (``10%``) of the patterns of files in the
    tree; returns the failure message when more than that could not be placed."""
    limit, percent = parse_threshold(threshold)
    total, bad, text = len(report.rows), report.unplaced, threshold.strip()
    over = (100.0 * bad / total if total else 0.0) > limit if percent else bad > limit
    return f"{bad} of {total} pattern(s) could not be placed (more than {text})" if over else None
