"""Stage 3, bucket: every test of a kept file into a mode, from the memory's evidence.

For each device-generic test the request carries what memory knows: decorators, the
OpInfo ops / dtypes / modules it is instantiated over (static map), the aten ops it
dispatched on CPU (capture run), what the device probe found about the calls it made, its
summary and source, and its nearest neighbours with the decisions they already have in the
current configs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from testcurator.agents.brain import SOURCE_LINES, Brain, BrainContext, BucketRequest, SimilarTest
from testcurator.agents.decision import Decision
from testcurator.memory.api import Memory
from testcurator.memory.capability import ProbeEvidence
from testcurator.memory.evidence import TestEvidence
from testcurator.memory.store import StoredTest
from testcurator.vocab import TestKey

NEIGHBOURS = 5


def _source(root: Path, test: StoredTest) -> str:
    try:
        lines = (root / test.path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[test.line_start - 1 : min(test.line_end, test.line_start - 1 + SOURCE_LINES)])


def _similar(memory: Memory, test: StoredTest, previous: Mapping[TestKey, tuple[str, str]]) -> tuple[SimilarTest, ...]:
    if not previous:
        return ()
    try:
        hits = memory.similar(str(TestKey.of(test.path, test.generic)), k=NEIGHBOURS * 2)
    except Exception:  # noqa: BLE001 - no embeddings built (--no-embed): neighbours are optional evidence
        return ()
    out = []
    for hit in hits:
        for other in hit.tests:
            key = TestKey.of(other.path, other.generic)
            if key in previous and other.generic != test.generic:
                mode, reason = previous[key]
                out.append(SimilarTest(other.generic, mode, reason, round(1.0 - hit.distance, 4)))
    return tuple(out[:NEIGHBOURS])


def requests_for_file(root: Path, memory: Memory, rel: str, evidence: Mapping[TestKey, TestEvidence],
                      previous: Mapping[TestKey, tuple[str, str]],
                      probe: Mapping[TestKey, ProbeEvidence] | None = None,
                      select: Callable[[str], bool] | None = None) -> list[BucketRequest]:
    """One request per generic test of ``rel`` (memory's tests, plus any only collection saw);
    ``probe``: the capability probe's findings per test, when the run probed the device;
    ``select``: only the tests (generic names) it accepts (a delta run's), before their
    source and similar tests are looked up."""
    stored = {t.generic: t for t in memory.tests_in_file(rel)}
    seen = {key.name for key in evidence if key.file == rel}
    requests = []
    for generic in sorted(set(stored) | seen):
        if select is not None and not select(generic):
            continue
        ev = evidence.get(TestKey.of(rel, generic), TestEvidence())
        test = stored.get(generic)
        requests.append(BucketRequest(
            test=generic,
            file=rel,
            content_hash=test.content_hash if test else f"collected:{TestKey.of(rel, generic)}",
            summary=test.summary if test else "",
            decorators=tuple(d.text() for d in test.decorators) if test else (),
            ops=ev.ops,
            aten_ops=ev.aten,
            layout_ops=ev.layouts,
            dtypes=ev.dtypes,
            modules=ev.modules,
            source=_source(root, test) if test else "",
            similar=_similar(memory, test, previous) if test else (),
            probe=(probe or {}).get(TestKey.of(rel, generic)),
            cpu_outcomes=tuple(ev.cpu.values()),
            cpu_failure=ev.cpu_failure,
            cpu_failed=ev.cpu_failed,
        ))
    return requests


def bucket_tests(brain: Brain, ctx: BrainContext, requests: Sequence[BucketRequest]) -> list[Decision]:
    """The brain's decisions for one file's requests (one per request, in order)."""
    if not requests:
        return []
    return brain.bucket(list(requests), ctx)
