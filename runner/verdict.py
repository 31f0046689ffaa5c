"""Whether a curated run held, as an exit code CI can gate on, and the lines that say why.

The same codes for ``run``, ``exec``, ``upgrade`` and ``enable-op --execute``:

- ``0`` (:data:`HELD`): the curated suite held: no mandatory failure, no strict unexpected
  pass, no infrastructure failure;
- ``1`` (:data:`NOT_HELD`): a ``mandatory_success`` test failed (failed, error, crashed,
  timeout: the plugin turns every other mode's failure into ``xfailed``/``skipped``), or an
  ``xfail_strict`` test passed (pytest reports that as failed);
- ``2``: bad input (``BadInputError``; never from here);
- ``3`` (:data:`INFRASTRUCTURE_FAILED`): pytest did not do its job
  (:mod:`testcurator.runner.reconcile`), or no test ran at all and the user did not
  accept that (``allow_empty``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from testcurator.runner.reconcile import is_infrastructure
from testcurator.runner.results.records import TestRecord
from testcurator.vocab import UNEXPECTED_PASS

HELD, NOT_HELD, BAD_INPUT, INFRASTRUCTURE_FAILED = 0, 1, 2, 3
_NAMED = 10


@dataclass(frozen=True)
class Verdict:
    code: int
    failures: tuple[TestRecord, ...]
    infrastructure: tuple[TestRecord, ...]
    tests: int

    @property
    def held(self) -> bool:
        return self.code == HELD

    def lines(self, where: str) -> list[str]:
        """What the last lines of a command say: the verdict, what and where."""
        out: list[str] = []
        for record in self.infrastructure:
            out.append(f"INFRASTRUCTURE FAILURE: {record.evidence}")
            text = (record.failure_text or "").strip()
            if text and text != record.evidence:
                out += [f"  {line}" for line in text.splitlines()]
        if self.tests == 0 and not self.infrastructure and self.code == INFRASTRUCTURE_FAILED:
            out.append("INFRASTRUCTURE FAILURE: no test ran (the selection collected nothing); "
                       "give --allow-empty if that is expected")
        if self.failures:
            out.append(f"NOT HELD: {len(self.failures)} mandatory failure(s) or strict unexpected pass(es):")
            out += [_failure_line(r) for r in self.failures[:_NAMED]]
            if len(self.failures) > _NAMED:
                out.append(f"  ... and {len(self.failures) - _NAMED} more")
        verdict = {HELD: "held", NOT_HELD: "did NOT hold", INFRASTRUCTURE_FAILED: "could not be checked"}[self.code]
        out.append(f"the curated suite {verdict} ({self.tests} test(s) ran; exit {self.code}); results: {where}")
        return out


def _failure_line(record: TestRecord) -> str:
    if record.failure_class == UNEXPECTED_PASS:  # pytest's "failed": the test passed
        return f"  {record.nodeid}: unexpected pass: {_first(record.evidence)}"
    return f"  {record.nodeid}: {record.outcome}" + (
        f" [{record.failure_class}] {_first(record.evidence)}" if record.failure_class else "")


def _first(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def verdict(records: Iterable[TestRecord], *, allow_empty: bool = False) -> Verdict:
    """The verdict of a run's records (see the module docstring)."""
    records = list(records)
    infra = tuple(r for r in records if is_infrastructure(r))
    tests = [r for r in records if not is_infrastructure(r)]
    failures = tuple(r for r in tests if r.is_failure)
    if infra or (not tests and not allow_empty):
        code = INFRASTRUCTURE_FAILED
    else:
        code = NOT_HELD if failures else HELD
    return Verdict(code, failures, infra, len(tests))
