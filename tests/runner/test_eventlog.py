"""The fold of an invocation's events keeps what is read of a test once it finished: its record."""

from __future__ import annotations

from pathlib import Path

from testcurator.runner.eventlog import EventFold

NODE = "test/test_x.py::TestXCPU::test_{}_cpu"


def _report(nodeid: str, when: str, outcome: str, longrepr: str | None = None) -> dict[str, object]:
    return {"event": "report", "nodeid": nodeid, "when": when, "outcome": outcome, "longrepr": longrepr,
            "duration": 0.5, "sections": [["Captured stdout call", "x" * 10_000]]}


def test_a_finished_tests_reports_go_and_its_record_stays(tmp_path: Path) -> None:
    source = tmp_path / "run-0.events.jsonl"
    fold = EventFold()
    done, dying = NODE.format("fails"), NODE.format("dies")
    for event in ({"event": "start", "nodeid": done}, _report(done, "setup", "passed"),
                  _report(done, "call", "failed", "AssertionError: 1 != 2"), _report(done, "teardown", "passed"),
                  {"event": "finish", "nodeid": done}, {"event": "start", "nodeid": dying},
                  _report(dying, "setup", "passed")):
        fold.feed(source, event)
    assert list(fold.tests) == [dying]  # nothing held of the finished test but its record
    record = fold.done[done]
    assert (record.outcome, record.duration) == ("failed", 1.5) and "1 != 2" in (record.failure_text or "")
    # The one whose process died under it is still there for its crash record.
    source.with_name(source.name + ".fault").write_text("Fatal Python error: Segmentation fault\n")
    dead = fold.dead_records(-11)
    assert list(dead) == [dying] and dead[dying].outcome == "crashed" and dead[dying].duration == 0.5
    # A finish that comes again changes nothing.
    fold.feed(source, {"event": "finish", "nodeid": done})
    assert fold.done[done] == record and fold.reported() == 1
