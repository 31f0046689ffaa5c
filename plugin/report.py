"""The terminal summary of what the curate plugin applied."""

from __future__ import annotations

from typing import Any

from testcurator.vocab import MODES

STALE_SHOWN = 20


def _order(label: str) -> tuple[int, str]:
    mode = label.split(" ", 1)[0]
    return (MODES.index(mode) if mode in MODES else len(MODES), label)


def format_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{label} {counts[label]}" for label in sorted(counts, key=_order))


def write_summary(terminalreporter: Any, summary: Any) -> None:
    """Tests per applied mode (overall and per file), then stale config entries per file."""
    total = sum(summary.modes.values())
    terminalreporter.section("testcurator", sep="-")
    terminalreporter.line(f"{total} tests curated: {format_counts(summary.modes)}")
    if summary.included:
        terminalreporter.line(f"{summary.included} dtype instances added by edits.dtypes.include")
    for path in sorted(summary.per_file):
        terminalreporter.line(f"  {path}: {format_counts(summary.per_file[path])}")
    stale_total = sum(len(v) for v in summary.stale.values())
    if stale_total:
        terminalreporter.line(f"{stale_total} stale config entries (matched no collected test):")
        for path in sorted(summary.stale):
            names = summary.stale[path]
            shown = ", ".join(names[:STALE_SHOWN]) + (f", ... ({len(names) - STALE_SHOWN} more)" if len(names) > STALE_SHOWN else "")
            terminalreporter.line(f"  {path}: {shown}")
