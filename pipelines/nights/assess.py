"""Tonight against the standing configs and the memory of runs: what broke, what is flaky,
and which proposed changes wait for a person.

A test the standing configs hold ``mandatory_success`` that failed in tonight's judge run
(pipelines/nightly/judge.py) is one of three things, by what changed since the last run in
which it passed (memory/history.py):

- a **regression**: the backend changed (its digest: profile, sources, installed module,
  behaviour environment), or no run on record saw it pass. Its standing entry stays; the
  demotion or exclusion refine proposes waits for ``--accept-regressions`` or
  ``testcurator accept``;
- **upstream**: torch or the test's source changed and the backend did not: not the
  backend's regression, and the regenerated decision is written as for any changed test;
- **flaky**: nothing changed. One night does not flip its mode: the entry stays.

A test whose outcome changed between runs with the same backend, torch and test source is
flaky whatever its mode; its entry stays as it stands, or, under the profile's
``flaky: {policy: quarantine, flips: K}``, becomes a non-strict xfail after K changes.
The run still fails (exit 1) on any mandatory failure of the standing configs: a verdict
never reads green by accident.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from testcurator.agents.decision import Decision
from testcurator.memory.history import History, RunIdentity, status
from testcurator.runner.results.records import TestRecord
from testcurator.vocab import FAILING, UNEXPECTED_PASS, TestKey

REGRESSION, UPSTREAM, FLAKY = "regression", "upstream", "flaky"
HISTORY_BRAIN = "history"  # who decided a quarantine: the profile's policy over the run history
TIMELINE_RUNS = 12  # the last runs a timeline shows


@dataclass(frozen=True)
class Failure:
    """A standing ``mandatory_success`` test that failed tonight."""

    test: str  # file::Class::test
    category: str  # REGRESSION | UPSTREAM | FLAKY
    causes: tuple[str, ...]
    failed: int  # instances that failed, of
    ran: int  # instances that ran
    failure: str  # the first failing instance: node id, outcome, class and evidence
    last_pass: dict[str, Any] | None  # {run_id, date} of the last run in which it passed


@dataclass(frozen=True)
class Flaky:
    test: str
    timeline: str  # oldest first, e.g. "P P F P" ('.' where it did not run)
    flips: int  # changes of outcome among runs with tonight's backend, torch and test source
    quarantined: bool


@dataclass(frozen=True)
class Assessment:
    failures: tuple[Failure, ...] = ()
    flaky: tuple[Flaky, ...] = ()
    held: tuple[str, ...] = ()  # tests whose standing entries stay as they are tonight
    accepted: tuple[str, ...] = ()  # regressions whose proposed change a person accepted (--accept-regressions)
    timelines: dict[str, str] = field(default_factory=dict)  # every test that failed or flipped

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Assessment:
        return cls(failures=tuple(Failure(**{**f, "causes": tuple(f["causes"])}) for f in data.get("failures", [])),
                   flaky=tuple(Flaky(**f) for f in data.get("flaky", [])), held=tuple(data.get("held", [])),
                   accepted=tuple(data.get("accepted", [])), timelines=dict(data.get("timelines", {})))

    def held_in(self, rel: str) -> set[str]:
        """Generic names of ``rel``'s tests whose entries stay."""
        return {k.name for k in map(TestKey.parse, self.held) if k.file == rel}


def record_key(record: TestRecord) -> TestKey | None:
    return TestKey.of(TestKey.parse(record.nodeid).file, record.generic) if record.generic else None


def statuses(records: Iterable[TestRecord]) -> dict[TestKey, str]:
    """Per test, its status in one run (memory/history.py :func:`status`)."""
    outcomes: dict[TestKey, list[tuple[str, str | None]]] = defaultdict(list)
    for r in records:
        key = record_key(r)
        if key is not None:
            outcomes[key].append((r.outcome, r.failure_class))
    return {k: s for k, outs in outcomes.items() if (s := status(outs)) != "-"}


def causes(then: RunIdentity, now: RunIdentity, then_hash: str | None, now_hash: str | None) -> tuple[str, ...]:
    """What changed between two runs, for one test: the words every report line uses."""
    found = []
    if then.backend_digest != now.backend_digest:
        found.append(f"backend changed ({then.backend_digest} -> {now.backend_digest})")
    if then.torch_version != now.torch_version:
        found.append(f"torch changed ({then.torch_version} -> {now.torch_version})")
    if then_hash and now_hash and then_hash != now_hash:
        found.append("test source changed")
    elif then.upstream_revision != now.upstream_revision:
        found.append("upstream tree changed (not this test's source)")
    return tuple(found)


def category(found: Sequence[str], last_pass: RunIdentity | None) -> str:
    if last_pass is None or any(c.startswith("backend") for c in found):
        return REGRESSION
    return UPSTREAM if found else FLAKY


@dataclass(frozen=True)
class Night:
    """What the assessment reads: tonight's identity, records and test hashes, and the runs
    before it (of the same ``--out``) with their statuses and hashes."""

    now: RunIdentity
    judge: Sequence[TestRecord]
    draft: Sequence[TestRecord]
    hashes: Mapping[TestKey, str]
    before: Sequence[RunIdentity]
    before_statuses: Mapping[TestKey, Mapping[int, str]]
    before_hashes: Mapping[int, Mapping[TestKey, str]]

    @classmethod
    def load(cls, history: History, now: RunIdentity, judge: Sequence[TestRecord], draft: Sequence[TestRecord],
             hashes: Mapping[TestKey, str]) -> Night:
        before = [r for r in history.runs(now.out_dir, full_only=True) if r.run_id != now.run_id]
        seqs = [r.seq for r in before]
        return cls(now, judge, draft, hashes, before, history.statuses(seqs), {s: history.sources(s) for s in seqs})

    def same_inputs(self, run: RunIdentity, key: TestKey) -> bool:
        return not causes(run, self.now, self.before_hashes.get(run.seq, {}).get(key), self.hashes.get(key))

    def timeline(self, key: TestKey, tonight: str) -> str:
        marks = [self.before_statuses.get(key, {}).get(r.seq, ".") for r in self.before] + [tonight]
        return " ".join(marks[-TIMELINE_RUNS:])

    def flips(self, key: TestKey, tonight: str) -> int:
        """Changes of outcome among the runs with tonight's inputs for ``key``, tonight included."""
        seen = [s for r in self.before if self.same_inputs(r, key) and (s := self.before_statuses.get(key, {}).get(r.seq))]
        seen += [tonight] if tonight != "-" else []
        return sum(a != b for a, b in zip(seen, seen[1:]))

    def last_pass(self, key: TestKey) -> RunIdentity | None:
        return next((r for r in reversed(self.before) if self.before_statuses.get(key, {}).get(r.seq) == "P"), None)


def _failure_line(r: TestRecord) -> str:
    text = (r.evidence or r.failure_text or "").strip().splitlines()
    return f"{r.nodeid}: {r.outcome}" + (f" [{r.failure_class}]" if r.failure_class else "") + (f" {text[0]}" if text else "")


def judge_failures(night: Night) -> list[Failure]:
    by_test: dict[TestKey, list[TestRecord]] = defaultdict(list)
    for r in night.judge:
        key = record_key(r)
        if key is not None:
            by_test[key].append(r)
    out = []
    for key, records in sorted(by_test.items()):
        failing = [r for r in records if r.outcome in FAILING and r.failure_class != UNEXPECTED_PASS]
        if not failing:
            continue
        last = night.last_pass(key)
        found = causes(last, night.now, night.before_hashes.get(last.seq, {}).get(key), night.hashes.get(key)) \
            if last else ("no run on record saw it pass",)
        ran = sum(r.outcome != "skipped" for r in records)
        out.append(Failure(str(key), category(found if last else (), last), found, len(failing), ran,
                           _failure_line(failing[0]), {"run_id": last.run_id, "date": last.date} if last else None))
    return out


def assess(night: Night, *, accept_regressions: bool, policy: str, flips_to_quarantine: int) -> Assessment:
    """See the module docstring."""
    tonight = statuses(night.judge or night.draft)  # one phase, as history's statuses (STATUS_PHASES)
    failures = judge_failures(night)
    flaky, timelines = [], {}
    for key in sorted(set(tonight) | {TestKey.parse(f.test) for f in failures}):
        mark = tonight.get(key, "-")
        flips = night.flips(key, mark)
        if flips or key in {TestKey.parse(f.test) for f in failures}:
            timelines[str(key)] = night.timeline(key, mark)
        if flips:
            flaky.append(Flaky(str(key), timelines[str(key)], flips,
                               policy == "quarantine" and flips >= flips_to_quarantine))
    held = {f.test for f in failures if f.category == FLAKY or (f.category == REGRESSION and not accept_regressions)}
    held |= {f.test for f in flaky if not f.quarantined}
    accepted = sorted(f.test for f in failures if f.category == REGRESSION and accept_regressions)
    return Assessment(tuple(failures), tuple(flaky), tuple(sorted(held)), tuple(accepted), timelines)


def quarantine_decision(flaky: Flaky, flips_to_quarantine: int) -> Decision:
    return Decision(
        TestKey.parse(flaky.test).name, "xfail",
        f"Quarantined as flaky: its outcome changed {flaky.flips} time(s) between runs with the same backend, torch "
        f"and test source ({flaky.timeline}, oldest first); a non-strict xfail by the profile's flaky policy "
        f"(quarantine after {flips_to_quarantine}).",
        (f"history: {flaky.timeline}",), HISTORY_BRAIN, None)
