"""Stage 4, refine: run the draft suite on the device, then re-bucket from the results.

The draft runs with every non-skipped test as ``mandatory_success`` (xfail marks would hide
raw outcomes). Each test's instantiated variants become :class:`ExecutionRecord`s (one
outcome per attempt, the failure class and its evidence line), and the brain's refine
rules turn them into the corrected decisions. Which rules, and why, is documented in
agents/offline/brain.py.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

from testcurator.agents.brain import Brain, BrainContext, BucketRequest, ExecutionRecord, RefineRequest
from testcurator.agents.decision import Decision
from testcurator.runner.results.records import TestRecord
from testcurator.vocab import UNEXPECTED_PASS, TestKey


def _rel(nodeid: str, root: Path) -> str:
    path = TestKey.parse(nodeid).file
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix() if Path(path).is_absolute() else path
    except ValueError:
        return path


def execution_record(rec: TestRecord) -> ExecutionRecord:
    """A runner record as the brain's evidence: outcomes per attempt, class, evidence line."""
    attempts = max(1, rec.attempts)
    if rec.flaky:
        outcomes = ("failed",) * (attempts - 1) + ("passed",)
    elif rec.failure_class == UNEXPECTED_PASS:  # a strict xfail that passed: pytest's "failed"
        outcomes = ("xpassed",) * attempts
    else:
        outcomes = (rec.outcome,) * attempts
    passed = rec.failure_class == UNEXPECTED_PASS
    message = "" if passed else rec.evidence or (_skip_reason(rec.failure_text) if rec.outcome == "skipped" else "")
    return ExecutionRecord(variant=rec.nodeid, outcomes=outcomes, dtype=rec.dtype, op=rec.op, module=rec.module,
                           failure_class=None if passed else rec.failure_class, message=message, params=rec.params,
                           op_variant=rec.op_variant)


def _skip_reason(text: str | None) -> str:
    """A skip's reason, as pytest gave it (``Skipped: <reason>``), on one line."""
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    return line.removeprefix("Skipped: ")


def group_records(records: Sequence[TestRecord], root: Path) -> dict[TestKey, list[ExecutionRecord]]:
    """``file::generic`` (relative to ``root``) -> that test's variants, sorted by node id."""
    out: dict[TestKey, list[ExecutionRecord]] = defaultdict(list)
    for rec in sorted(records, key=lambda r: r.nodeid):
        if rec.generic:
            out[TestKey.of(_rel(rec.nodeid, root), rec.generic)].append(execution_record(rec))
    return dict(out)


def refine_tests(brain: Brain, ctx: BrainContext, requests: Sequence[BucketRequest],
                 previous: Sequence[Decision], executions: Mapping[TestKey, Sequence[ExecutionRecord]]) -> list[Decision]:
    """Re-bucket one file's tests; tests without results keep their decision unchanged."""
    by_test = {d.test: d for d in previous}
    # A file the draft ran collects every test it has on the device, even those it skips: a
    # test with no variant at all does not exist there.
    ran = {key.file for key in executions}
    absent = {r.test: not_instantiated(r.test, ctx.backend.device) for r in requests
              if r.file in ran and r.test in by_test and TestKey.of(r.file, r.test) not in executions}
    refine = [RefineRequest(r, by_test.get(r.test), tuple(executions.get(TestKey.of(r.file, r.test), ())))
              for r in requests if r.test not in absent]
    decided = {d.test: d for d in brain.refine(refine, ctx)} if refine else {}
    return [absent.get(r.test) or decided[r.test] for r in requests]


def not_instantiated(test: str, device: str) -> Decision:
    """The decision for a test the draft's collection did not instantiate on the device at
    all (``only_for``, ``@onlyOn``, device-specific classes) while its file ran: that fact,
    not a guess about what it would need there. A skip: there is nothing to run."""
    return Decision(test=test, mode="skip", brain="execution", prompt_hash=None,
                    reason=f"Skip: PyTorch instantiates no variant of it for {device} (the draft's collection found "
                           "none while its file ran: only_for, @onlyOn or a device-specific class), so there is "
                           "nothing to run there.",
                    evidence=(f"draft: 0 variants collected on {device}",))
