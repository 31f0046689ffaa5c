"""What a config review says, in words every rendering shares.

The marks, the arrow and the phrases for one test's or one file's change, and the summary
lines, as plain text. The renderings (markdown, terminal and JSON in ``review_render.py``,
HTML in ``review_html.py``) all take them from here so that a change reads the same in
each, and so that neither rendering module imports the other for them: ``review_render``
dispatches to ``review_html``, which needs only this module. One arrow, ``->``; a side
without a value says what it means (``unlisted (skip)``, ``file not in config``,
``no reason given``), never ``None``.
"""

from __future__ import annotations

from testcurator.config.review import FileChange, ReviewReport, TestChange

KIND_MARK = {"added": "+", "removed": "-", "changed": "~"}
LOST, STALE = "✖", "⚠"
LEGEND = (f"+ added, - removed, ~ changed test; {LOST} loses mandatory_success; "
          f"{STALE} mode changed but its reason did not; edits: +item added, -item removed")
LIST_LIMIT = 20
ARROW = "->"
NOT_IN_CONFIG = "file not in config"  # review.py's effective mode "absent": the file has no entry on that side
NO_REASON = "(no reason given)"


def side_mode(mode: str | None, effective: str) -> str:
    """A test's mode on one side: its entry's, else what applies to it unlisted."""
    if mode:
        return mode
    return NOT_IN_CONFIG if effective == "absent" else f"unlisted ({effective})"


def arrow(t: TestChange) -> str:
    """The mode transition (``skip -> xfail``), or the one mode when it did not change."""
    old = side_mode(t.old_mode, t.old_effective)
    new = side_mode(t.new_mode, t.new_effective)
    return old if old == new else f"{old} {ARROW} {new}"


def transition(key: str) -> str:
    """A summary transition (``mandatory_success -> skip``; ``absent`` said in words)."""
    return " -> ".join(NOT_IN_CONFIG if side == "absent" else side for side in key.split(" -> "))


def change_item(item: str) -> str:
    """``+ supported_dtypes int64`` / ``- label x`` in words (``added ...``, ``removed ...``):
    a leading ``-`` would read as a nested list item in markdown."""
    if item.startswith(("+ ", "- ")):
        return ("added " if item[0] == "+" else "removed ") + item[2:]
    return item


def what(t: TestChange) -> str:
    """The kind of change, with the aspects a ``changed`` test changed in."""
    return t.kind if t.kind != "changed" else "changed: " + ", ".join(t.aspects)


def edit_parts(t: TestChange) -> list[str]:
    """``+exclude dtype int64``, ``-exclude dtype bool``; unchanged edits without a sign."""
    if t.kind == "removed":
        return []
    if t.edits_added or t.edits_removed:
        return [f"+{e}" for e in t.edits_added] + [f"-{e}" for e in t.edits_removed]
    return [t.new_edits] if t.new_edits else []


def reason(t: TestChange) -> str:
    """The reason as plain text: the old one for a removed test, a warning when it is stale."""
    if t.kind == "removed":
        return t.old_reason or ""
    if t.stale_reason:
        return f"{STALE} unchanged although the mode changed: {t.new_reason}"
    if "reason" in t.aspects:
        return f"{t.new_reason or NO_REASON} (was: {t.old_reason or NO_REASON})"
    return t.new_reason or ""


def marks(t: TestChange) -> str:
    """The warning marks a test carries (:data:`LOST`, :data:`STALE`)."""
    return (LOST if t.lost_mandatory else "") + (STALE if t.stale_reason else "")


def evidence(t: TestChange) -> str:
    """Where the entry is written on each side (``new file:line / old file:line``)."""
    return " / ".join(x for x in (f"new {t.new_where}" if t.new_where else "", f"old {t.old_where}" if t.old_where else "") if x)


def headline(report: ReviewReport) -> str:
    """The ten-second summary."""
    s = report.summary
    lost = f"{s.mandatory_lost} of {s.mandatory_before} mandatory_success test(s) lose that mode"
    stale = f"; {s.stale_reasons} mode change(s) under an unchanged reason" if s.stale_reasons else ""
    narrowed = f", {len(s.narrowed_tests)} keep it with a new exclusion" if s.narrowed_tests else ""
    return (f"{lost}{narrowed}{stale}; {s.added} added, {s.removed} removed, {s.changed} changed test(s) "
            f"in {len(report.files)} file(s)")


def summary_lines(report: ReviewReport) -> list[str]:
    """The summary as lines (the headline only, today)."""
    return [headline(report)]


def lost_list(report: ReviewReport, limit: int = LIST_LIMIT) -> list[str]:
    """The tests that lose ``mandatory_success``, at most ``limit`` and a count of the rest."""
    names = list(report.summary.lost_tests)
    return names[:limit] + ([f"... and {len(names) - limit} more"] if len(names) > limit else [])


def stale_list(report: ReviewReport, limit: int = LIST_LIMIT) -> list[str]:
    """The tests whose mode changed under an unchanged reason, cut like :func:`lost_list`."""
    names = [f"{f.raw_path}::{t.name}" for f in report.files for t in f.tests if t.stale_reason]
    return names[:limit] + ([f"... and {len(names) - limit} more"] if len(names) > limit else [])


def file_heading(f: FileChange) -> str:
    """A file's heading line: its path and what happened to its entry."""
    return f"{f.raw_path}: {file_kind(f)}"


def file_kind(f: FileChange) -> str:
    """``changed (unlisted_test_mode skip -> xfail)``, ``added (unlisted_test_mode skip)``, ``removed``."""
    if f.kind == "added":
        return f"added (unlisted_test_mode {f.new_unlisted})"
    if f.kind == "changed" and f.old_unlisted != f.new_unlisted:
        return f"changed (unlisted_test_mode {f.old_unlisted} {ARROW} {f.new_unlisted})"
    return f.kind
