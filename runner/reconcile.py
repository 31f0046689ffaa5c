"""Did a pytest process really run what it was given? Infrastructure failures, made visible.

A pytest that exits with a usage error, an internal error or an interrupt, that leaves no
event log or a JUnit XML file that is missing or cut short, or that runs fewer tests than
it selected, has not tested anything that its (empty) table would suggest. Each such fault
becomes one record with ``failure_class='infrastructure'`` (:data:`INFRASTRUCTURE`) and
pytest's own message as its text, so it is in the results, in the JUnit XML, and decides
the exit code (:mod:`testcurator.runner.verdict`). Its node id (``<pytest run-0>``) names
the invocation, not a test: nothing retries it or reads it as evidence about a test.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from testcurator.runner.eventlog import EventFold
from testcurator.runner.pytest_fault import pytest_fault
from testcurator.runner.results.records import TestRecord, truncate
from testcurator.vocab import INFRASTRUCTURE

#: pytest's exit codes that mean "pytest itself did not do its job" (pytest.ExitCode).
PYTEST_FAULTS = {2: "was interrupted", 3: "hit an internal error", 4: "was given a bad command line (usage error)"}
#: Exit codes of a pytest that ran to its end (tests passed, failed, or none collected).
PYTEST_FINISHED = (0, 1, 5)
_MESSAGE_LINES = 25


def infrastructure_record(label: str, evidence: str, text: str | None = None) -> TestRecord:
    """The record of one infrastructure fault of invocation ``label`` (``run-0``...)."""
    return TestRecord(nodeid=f"<pytest {label}>", outcome="error", failure_class=INFRASTRUCTURE,
                      evidence=evidence, failure_text=truncate(text or evidence))


def is_infrastructure(record: TestRecord) -> bool:
    return record.failure_class == INFRASTRUCTURE


def pytest_message(log: Path) -> str:
    """What pytest said about its fault: the ``file:line: message`` that broke it (a conftest, an
    ini, a hook: runner/pytest_fault.py) instead of its tens of ``INTERNALERROR>`` lines, else its
    ``ERROR:`` lines, else the log's tail."""
    if not log.is_file():
        return f"(no log at {log})"
    text = log.read_text(encoding="utf-8", errors="replace")
    problem = pytest_fault(text)
    if problem is not None:
        return f"{problem}\n(pytest's whole output: {log})"
    lines = text.splitlines()[1:]  # line 1 is our argv
    own = [line for line in lines if line.startswith(("ERROR:", "INTERNALERROR>", "E   ", "!!!", "Interrupted"))
           or "error:" in line]
    return "\n".join((own or lines)[-_MESSAGE_LINES:]) or "(pytest printed nothing)"


def junit_count(path: Path) -> int | None:
    """Test cases in a JUnit XML file; None when it is missing or not well-formed (cut short)."""
    try:
        return sum(1 for _ in ET.parse(path).getroot().iter("testcase"))
    except (OSError, ET.ParseError):
        return None


def invocation_fault(returncode: int, *, died: bool, collected: bool, finished: int, junit: Path, log: Path) -> str | None:
    """Why one pytest invocation cannot be trusted, or None.

    ``died``: a test was running when the process ended (a crash or the hang guard, which the
    runner records against that test); ``collected``: the event log has pytest's selection;
    ``finished``: tests with a complete record in the event log.
    """
    if died:
        return None
    where = f"see {log}"
    if returncode in PYTEST_FAULTS:
        return f"pytest {PYTEST_FAULTS[returncode]} (exit {returncode}); {where}"
    if returncode not in PYTEST_FINISHED:
        return f"pytest exited with code {returncode} without a test running; {where}"
    if not collected:
        return f"pytest (exit {returncode}) wrote no selection to the event log: testcurator's plugin did not run; {where}"
    count = junit_count(junit)
    if count is None:
        return f"pytest (exit {returncode}) left its JUnit XML missing or cut short: {junit}"
    if count < finished:
        return f"pytest's JUnit XML {junit} lists {count} test(s), its event log {finished}: the XML is cut short"
    return None


def unrun_fault(missing: list[str], selected: int, log: Path) -> str:
    """The selection ran fewer tests than pytest selected."""
    first = ", ".join(missing[:3]) + (" ..." if len(missing) > 3 else "")
    return f"{len(missing)} of {selected} selected test(s) have no result ({first}); see {log}"


def pass_fault(returncode: int, fold: EventFold, log: Path) -> str | None:
    """Why a single pytest pass (no reruns: the CPU op capture) cannot be trusted, or None.

    A test that died under the pass is evidence (it crashes on the reference device), not a
    fault; a pass that stopped without one, before running all it selected, is."""
    died = bool(fold.dead_records(returncode))
    if died:
        return None
    if returncode in PYTEST_FAULTS or returncode not in PYTEST_FINISHED:
        return f"pytest {PYTEST_FAULTS.get(returncode, 'failed')} (exit {returncode}):\n{pytest_message(log)}"
    if not fold.selected_known:
        return f"pytest (exit {returncode}) wrote no selection to the event log: testcurator's plugin did not run; see {log}"
    recorded = set(fold.done) | set(fold.collect_errors)
    missing = [n for n in fold.collected if n not in recorded]
    return unrun_fault(missing, len(fold.collected), log) if missing else None
