"""What the plugins print in pytest's terminal summary: the curate plugin's counts
(:func:`write_summary`), and pytest's failure summary in linear time, in the pytest processes a
run starts.

pytest (9.2) prints each failure's teardown sections after looking them up by scanning every
setup and teardown report of the session that passed (``TerminalReporter._get_teardown_reports``):
failures x tests. On the real-upstream corpus (35,979 instances, 8,189 of them failing on the
example backend) the draft's last test ended and its pytest then spent about 3.5 minutes in
that scan, at 100% of one core, printing a summary nobody reads: our runs take outcomes from the
JUnit XML and the event log, and the printed summary only goes to a log file. PyTorch's own
``pytest.ini`` asks for it (``--tb=native``), and ``--tb=no`` is not a way out: it also cuts the
tracebacks that the JUnit XML carries, which the classifier and the gap board read.

So the same lookup is answered from an index built once, from the same reports, and the
summary prints what it printed before. Registered by :mod:`testcurator.plugin.events` (only in
processes started with ``--curate-events``); a pytest without that private method is left alone.

The terminal reporter also keeps every report until the session ends, three a test (setup,
call, teardown), each with the item's keywords and the captured output: on OpenReg's draft of
the corpus, pytest-xdist's controller reached 857 MB. Once every other plugin has logged a
report (:class:`ReportTrim`), what the summary will not print is let go: a passed setup report, a passed teardown report of a test whose call did not fail, and the
keywords and captured output of a report that passed or skipped. Outcomes, counts, skip and
xfail reasons and every failure's text stay. With ``-rP``/``-rA`` (a summary of passes) the
reports are kept whole. Measured: a synthetic 35,000-test session under ``-n 2``, the
controller's peak 372 -> 199 MB; OpenReg's real draft of 1,978 unary-ufunc tests, the
controller grew 11 MB instead of 30.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Generator
from typing import Any

import pytest

from testcurator.vocab import MODES

PLUGIN_NAME = "testcurator-linear-summary"
_METHOD = "_get_teardown_reports"


class TeardownIndex:
    """``_get_teardown_reports(node_id)`` of one terminal reporter, from an index of its reports."""

    def __init__(self, reporter: Any) -> None:
        self.reporter = reporter
        self._by_id: dict[str, list[Any]] = {}
        self._indexed = -1  # how many passed reports (stats[""]) the index was built from

    def __call__(self, node_id: object) -> list[Any]:
        # Reports are only ever added, and the summary comes last: the index is rebuilt when
        # their count moved. The count is read off the list itself, since getreports() copies
        # it (one copy per failure was the scan again, 4 times cheaper: still minutes).
        count = len(self.reporter.stats.get("", ()))
        if count != self._indexed:
            by_id: defaultdict[str, list[Any]] = defaultdict(list)
            for report in self.reporter.getreports(""):
                if getattr(report, "when", None) == "teardown":
                    by_id[str(report.nodeid)].append(report)
            self._by_id, self._indexed = dict(by_id), count
        # pytest 9 passes the report's structured id, older ones its nodeid: both print as it.
        return list(self._by_id.get(str(node_id), ()))


class LinearSummary:
    """Swaps the terminal reporter's teardown lookup for a :class:`TeardownIndex` at session start."""

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and callable(getattr(reporter, _METHOD, None)):
            setattr(reporter, _METHOD, TeardownIndex(reporter))


class ReportTrim:
    """Lets go of what the terminal summary of a run will not print, as each report is logged."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.failed_calls: set[str] = set()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        yield  # after every other plugin: terminal, JUnit XML, the tree's own reporters
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or set(getattr(reporter, "reportchars", "")) & {"P", "A"}:
            return
        if report.failed:
            if report.when == "call":
                self.failed_calls.add(report.nodeid)
            return
        if report.when == "teardown" and report.nodeid in self.failed_calls:
            self.failed_calls.discard(report.nodeid)
            return  # the failure's summary prints this teardown's captured output
        report.keywords, report.sections = {}, []
        kept = reporter.stats.get("")
        if report.passed and report.when != "call" and kept and kept[-1] is report:
            kept.pop()


def register(config: pytest.Config) -> None:
    """Register :class:`LinearSummary` and :class:`ReportTrim` once per config."""
    if not config.pluginmanager.has_plugin(PLUGIN_NAME):
        config.pluginmanager.register(LinearSummary(), PLUGIN_NAME)
        config.pluginmanager.register(ReportTrim(config), f"{PLUGIN_NAME}-trim")


# The curate plugin's section: tests per applied mode, and the stale entries of its config.
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
