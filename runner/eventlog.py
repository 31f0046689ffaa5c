"""Read the event logs written by ``testcurator.plugin.events`` and fold them into records.

One pytest invocation writes ``PATH`` (plain run) or ``PATH.gw0``, ``PATH.gw1``, ... and
``PATH.controller`` (xdist), each with a ``.fault`` file beside it. :class:`EventTail`
follows them while the process runs (for the progress bar) and :class:`EventFold` turns
the lines into :class:`~testcurator.runner.results.records.TestRecord`:

- a test with a ``finish`` line gets its outcome from its phase reports, one with a
  ``settled`` line (a skip settled at collection) is skipped with that line's reason;
- a test with a ``start`` but no ``finish`` once the process has ended is the one that
  was running when its process died: ``timeout`` if the fault file holds faulthandler's
  ``Timeout (h:mm:ss)!`` dump, otherwise ``crashed`` (signal from the fault text, the
  return code, or xdist's "worker 'gw0' crashed while running ..." report);
- a test run in a forked child that died (``--curate-isolate``) finishes with a failed
  report that says so: ``crashed`` too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testcurator.names import params_from, parse_name
from testcurator.plugin.forks.handles import report_died
from testcurator.runner.results.classify import classify
from testcurator.runner.results.records import TestRecord, truncate
from testcurator.vocab import FAILING, TestKey, instance_key


class EventTail:
    """Incremental reader of every event file of one invocation (complete lines only)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.offsets: dict[Path, int] = {}

    def files(self) -> list[Path]:
        found = [p for p in self.base.parent.glob(self.base.name + "*") if not p.name.endswith(".fault")]
        return sorted(p for p in found if p.name == self.base.name or p.name.startswith(self.base.name + "."))

    def poll(self) -> list[tuple[Path, dict[str, Any]]]:
        out: list[tuple[Path, dict[str, Any]]] = []
        for path in self.files():
            start = self.offsets.get(path, 0)
            with path.open("rb") as fh:
                fh.seek(start)
                chunk = fh.read()
            end = chunk.rfind(b"\n") + 1  # a half-written last line waits for the next poll
            self.offsets[path] = start + end
            for raw in chunk[:end].splitlines():
                if raw.strip():
                    out.append((path, json.loads(raw)))
        return out


@dataclass
class _TestState:
    nodeid: str
    source: Path
    identity: dict[str, Any] = field(default_factory=dict)
    reports: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class EventFold:
    """Accumulated state of one invocation's event files."""

    collected: list[str] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)  # collected node id -> its instance key
    generics: dict[str, str] = field(default_factory=dict)  # instance key -> its generic name
    selected_known: bool = False  # a ``collected`` event came: pytest got as far as selecting
    rootdir: str | None = None
    # Tests started and not finished: a finished test's record (``done``) is all that is read
    # of it from then on, and its reports (tracebacks, captured output: about 300 MB in the
    # run's own process by the end of OpenReg's corpus draft) go.
    tests: dict[str, _TestState] = field(default_factory=dict)
    crash_reports: dict[str, str] = field(default_factory=dict)  # nodeid -> xdist text
    collect_errors: dict[str, str] = field(default_factory=dict)
    collect_skips: dict[str, str] = field(default_factory=dict)  # files skipped as a whole
    done: dict[str, TestRecord] = field(default_factory=dict)
    settled: set[str] = field(default_factory=set)  # skips logged at collection (--curate-settle-skips)

    def feed(self, source: Path, event: dict[str, Any]) -> None:
        kind, nodeid = event.get("event"), event.get("nodeid", "")
        if kind == "collected":
            self.selected_known = True
            seen = set(self.collected)
            self.rootdir = self.rootdir or event.get("rootdir")
            self.collected.extend(n for n in event["nodeids"] if n not in seen)
            self.keys.update(zip(event["nodeids"], event.get("keys") or ()))
            self.generics.update((k, g) for k, g in zip(event.get("keys") or (), event.get("generics") or ()) if g)
            # Named here, before their own lines (one process writes those after this event).
            self.settled.update(event.get("settled") or ())
        elif kind == "collect_error":
            self.collect_errors[nodeid] = event.get("longrepr") or ""
        elif kind == "collect_skip":
            self.collect_skips[nodeid] = event.get("longrepr") or ""
        elif kind == "settled":  # a skip settled at collection (plugin/events.py): one line, done
            state = _TestState(nodeid, source, dict(event.get("identity") or {}),
                               reports=[{"when": "setup", "outcome": "skipped", "longrepr": event.get("longrepr")}])
            self.done[nodeid] = record_from_reports(state)
        elif kind == "start":
            # A retried test starts again in a fresh file; the latest start wins.
            self.tests[nodeid] = _TestState(nodeid, source, dict(event.get("identity") or {}))
        elif kind == "report" and event.get("when") == "???":
            self.crash_reports[nodeid] = event.get("longrepr") or ""
        elif kind == "report" and nodeid in self.tests:
            self.tests[nodeid].reports.append(event)
        elif kind == "finish" and nodeid in self.tests:
            self.done[nodeid] = record_from_reports(self.tests.pop(nodeid))  # once, not per poll

    def key(self, nodeid: str, record: TestRecord | None = None) -> str:
        """The instance key of ``nodeid`` (as the test process computed it), else derived from
        the record's generic name, else the node id itself."""
        known = self.keys.get(nodeid)
        if known is not None:
            return known
        return instance_key(nodeid, record.generic if record is not None else None)

    def reported(self) -> int:
        """Finished tests that went through pytest's protocol (and so its JUnit XML)."""
        return len(self.done.keys() - self.settled)

    def finished_records(self) -> dict[str, TestRecord]:
        return dict(self.done)

    def dead_records(self, returncode: int | None) -> dict[str, TestRecord]:
        """Records for tests whose process died under them (call once the process ended)."""
        out: dict[str, TestRecord] = {}
        for nodeid, state in self.tests.items():
            fault = _read_fault(state.source)
            xdist_text = self.crash_reports.get(nodeid)
            # Under xdist the controller's return code says nothing about the worker.
            rc = None if xdist_text is not None or _is_worker_file(state.source) else returncode
            out[nodeid] = dead_record(state, fault, xdist_text, rc)
        return out

    def collection_records(self) -> dict[str, TestRecord]:
        """A record per file that did not collect, and per file skipped as a whole."""
        out: dict[str, TestRecord] = {nodeid: TestRecord(nodeid=nodeid, outcome="skipped", failure_text=truncate(text, 500))
                                      for nodeid, text in self.collect_skips.items()}
        for nodeid, text in self.collect_errors.items():
            result = classify(text, outcome="error")
            out[nodeid] = TestRecord(nodeid=nodeid, outcome="error", failure_class=result.failure_class,
                                     evidence=result.evidence, failure_text=truncate(text))
        return out


def _is_worker_file(path: Path) -> bool:
    return path.suffix.startswith(".gw")


def _read_fault(events_file: Path) -> str:
    fault = Path(str(events_file) + ".fault")
    return fault.read_text(encoding="utf-8", errors="replace") if fault.exists() else ""


def identity_fields(nodeid: str, identity: dict[str, Any]) -> dict[str, Any]:
    """generic/device/dtype/op/op_variant/module/params for a record, parsing the node id as a fallback."""
    fields = {k: identity.get(k) for k in ("generic", "device", "dtype", "op", "op_variant", "module")}
    fields["params"] = params_from(identity.get("params"))
    if fields["generic"] is None:
        parts = TestKey.parse(nodeid.split("[", 1)[0]).parts
        if len(parts) >= 3:
            ident = parse_name(parts[-2], parts[-1])
            fields.update(generic=ident.generic, device=ident.device, dtype=ident.dtype)
    return fields


def _phase_outcome(reports: list[dict[str, Any]]) -> tuple[str, str | None]:
    by_when = {r["when"]: r for r in reports if not r.get("subtest")}
    setup, call, teardown = by_when.get("setup"), by_when.get("call"), by_when.get("teardown")
    if setup is not None and setup["outcome"] == "failed":
        return "error", setup.get("longrepr")
    if setup is not None and setup["outcome"] == "skipped":
        return ("xfailed" if setup.get("wasxfail") is not None else "skipped"), setup.get("longrepr")
    outcome, text = _subtests_outcome([r for r in reports if r.get("subtest")]) or _call_outcome(call)
    if teardown is not None and teardown["outcome"] == "failed" and outcome not in FAILING:
        outcome, text = "error", teardown.get("longrepr")
    return outcome, text


def _call_outcome(call: dict[str, Any] | None) -> tuple[str, str | None]:
    """The call phase's own report's outcome (no report: it passed, as a test with no call)."""
    if call is None:
        return "passed", None
    xfail = call.get("wasxfail") is not None
    if call["outcome"] == "failed":
        return "failed", call.get("longrepr")
    if call["outcome"] == "skipped":
        return ("xfailed" if xfail else "skipped"), call.get("longrepr") or call.get("wasxfail")
    return ("xpassed" if xfail else "passed"), None


def _subtests_outcome(subtests: list[dict[str, Any]]) -> tuple[str, str | None] | None:
    """The test's outcome from its subTests' reports, when one of them failed or failed as
    expected; None when they all passed or skipped (the call's own report decides).

    pytest 9 reports a failing subTest apart and the call itself passes, so the last call
    report alone read a mandatory test whose subTests failed as passed (upstream
    test_transform_bias_rescale_qkv on curatedev: the missing kernel in each of its subTests,
    and pytest's own summary "failed"). Under an xfail mark a failing subTest is xfailed and the
    call then counts as an unexpected pass (strict: a failure): the test failed as expected."""
    failed = next((r for r in subtests if r["outcome"] == "failed"), None)
    if failed is not None:
        return "failed", failed.get("longrepr")
    xfailed = next((r for r in subtests if r["outcome"] == "skipped" and r.get("wasxfail") is not None), None)
    if xfailed is not None:
        return "xfailed", xfailed.get("longrepr") or xfailed.get("wasxfail")
    return None


def record_from_reports(state: _TestState) -> TestRecord:
    outcome, text = _phase_outcome(state.reports)
    if outcome == "failed" and report_died(text):  # its forked child or cell died (plugin/forks/)
        outcome = "crashed"
    duration = sum(float(r.get("duration") or 0.0) for r in state.reports)
    failure_class = evidence = None
    if outcome in FAILING:
        result = classify(text, outcome=outcome)
        failure_class, evidence = result.failure_class, result.evidence
        if outcome == "crashed" and failure_class == "timeout":  # the child outlived the hang guard
            outcome = "timeout"
    return TestRecord(
        nodeid=state.nodeid, outcome=outcome, duration=duration, failure_class=failure_class,
        evidence=evidence, failure_text=truncate(text) if outcome in FAILING else truncate(text, 500),
        **identity_fields(state.nodeid, state.identity),
    )


def dead_record(state: _TestState, fault: str, xdist_text: str | None, returncode: int | None) -> TestRecord:
    text = "\n".join(t for t in (xdist_text, fault) if t)
    if not text and returncode is not None:
        text = f"pytest process exited with code {returncode} while running {state.nodeid}"
    result = classify(text, outcome="crashed", returncode=returncode)
    outcome = "timeout" if result.failure_class == "timeout" else "crashed"
    if result.signal and result.signal not in result.evidence:
        result_evidence = f"{result.evidence} ({result.signal})"
    else:
        result_evidence = result.evidence
    duration = sum(float(r.get("duration") or 0.0) for r in state.reports)
    return TestRecord(
        nodeid=state.nodeid, outcome=outcome, failure_class=result.failure_class, evidence=result_evidence,
        duration=duration, failure_text=truncate(text), **identity_fields(state.nodeid, state.identity),
    )
