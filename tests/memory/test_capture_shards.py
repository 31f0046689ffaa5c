"""The CPU capture's plan: which targets (files or node ids) each capture job runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testcurator.memory.capture_shards import plan_targets, scan_events
from testcurator.runner.eventlog import EventFold, EventTail
from testcurator.runner.reconcile import pass_fault
from testcurator.vocab import TestKey

KNOWN = {"test/a.py::T::t1": 6.0, "test/a.py::T::t2": 4.0, "test/b.py::T::t": 1.0, "test/c.py::T::t": 1.0,
         "test/d.py::T::t": 8.0}


@pytest.mark.parametrize(("targets", "shards", "expected"), [
    # files weigh their known totals: a 10, d 8, b 1, c 1 -> {a}, {b, c, d}
    # (each job's files with the slowest known test first)
    (["test/a.py", "test/b.py", "test/c.py", "test/d.py"], 2, [("test/a.py",), ("test/d.py", "test/b.py", "test/c.py")]),
    # never more jobs than targets, and no empty one
    (["test/a.py", "test/b.py"], 5, [("test/a.py",), ("test/b.py",)]),
    ([], 3, []),
    # one shard: everything; an unknown file first, then by the slowest known test
    (["test/b.py", "test/a.py", "test/new.py", "test/d.py"], 1, [("test/new.py", "test/d.py", "test/a.py", "test/b.py")]),
    # node ids weigh their own durations
    (["test/a.py::T::t1", "test/a.py::T::t2", "test/d.py::T::t"], 2, [("test/d.py::T::t",), ("test/a.py::T::t1", "test/a.py::T::t2")]),
])
def test_plan_balances_targets_by_known_durations(targets: list[str], shards: int,
                                                  expected: list[tuple[str, ...]]) -> None:
    assert sorted(plan_targets(targets, KNOWN, shards)) == sorted(expected)


def test_an_unknown_file_weighs_the_median_known_file() -> None:
    # known totals a 10, b 1, d 8 -> median 8 for the new file: it pairs with b, not with a
    plan = plan_targets(["test/a.py", "test/b.py", "test/d.py", "test/new.py"], KNOWN, 2)
    # (and, its duration unknown, it runs first in its job)
    assert sorted(plan) == [("test/a.py", "test/b.py"), ("test/new.py", "test/d.py")]


def test_the_plan_is_deterministic_and_covers_every_target_once() -> None:
    files = [f"test/f{i}.py" for i in range(50)]
    plan = plan_targets(files, {}, 7)
    assert plan == plan_targets(files, {}, 7)
    assert sorted(t for part in plan for t in part) == sorted(files)
    assert len(plan) == 7 and {len(part) for part in plan} <= {7, 8}


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """A tree with an empty pytest.ini and ``files`` under test/."""
    root = tmp_path / "tree"
    (root / "test").mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\n")
    for name, text in files.items():
        (root / "test" / name).write_text(text)
    return root


def test_a_sharded_capture_runs_each_file_in_one_job_and_records_durations(tmp_path: Path) -> None:
    from testcurator.memory.capture_shards import run_capture
    from testcurator.plugin.oprecord import read_records
    from testcurator.runner.shards.durations import DurationStore
    from testcurator.runner.shards.executors import LocalExecutor

    root = _tree(tmp_path, {
        "test_a.py": "import pytest\n\ndef test_pass():\n    assert 1\n\ndef test_fail():\n    assert 0\n\n"
                     "@pytest.mark.skip(reason='off')\ndef test_skip():\n    pass\n",
        "test_b.py": "def test_other():\n    assert 1\n"})
    state, out = tmp_path / "state", tmp_path / "captured.jsonl"
    assert run_capture(root, ["test/test_a.py", "test/test_b.py"], out, tmp_path / "work", state_dir=state,
                       executor=LocalExecutor(), shards=2)
    outcomes = {r.nodeid: r.outcome for r in read_records(out) if r is not None}
    assert outcomes == {"test/test_a.py::test_pass": "passed", "test/test_a.py::test_fail": "failed",
                        "test/test_a.py::test_skip": "skipped", "test/test_b.py::test_other": "passed"}
    # each job was given only its own file (it collects nothing else)
    given = sorted((tmp_path / "work" / d / "targets.args").read_text() for d in ("1-of-2", "2-of-2"))
    assert given == ["test/test_a.py\n", "test/test_b.py\n"]
    with DurationStore(state) as store:
        timed = set(store.known())
    assert timed == {"test/test_a.py::test_pass", "test/test_a.py::test_fail", "test/test_b.py::test_other"}


@pytest.mark.parametrize("ini", [None, "pytest.ini"])
def test_node_ids_are_relative_to_the_tree_whatever_the_selection_file(tmp_path: Path, ini: str | None) -> None:
    """A delta capture names its selection file (in the state dir, outside the tree); in a
    tree with no pytest config that file once made pytest's rootdir the common ancestor of
    both, and no captured node id matched a delta test."""
    from testcurator.memory.capture_shards import run_capture
    from testcurator.plugin.oprecord import read_records
    from testcurator.plugin.only import write_keys
    from testcurator.runner.shards.executors import LocalExecutor

    root = tmp_path / "tree"
    (root / "test").mkdir(parents=True)
    if ini:
        (root / ini).write_text("[pytest]\n")
    (root / "test" / "test_a.py").write_text("def test_kept():\n    pass\n\ndef test_other():\n    pass\n")
    state = tmp_path / "state"
    keys = write_keys(state / "delta.tests", [TestKey.of("test/test_a.py", "test_kept")], root)
    out = tmp_path / "captured.jsonl"
    assert run_capture(root, ["test/test_a.py"], out, state / "work", state_dir=state, executor=LocalExecutor(),
                       extra=("--curate-only", str(keys)))
    assert [r.nodeid for r in read_records(out) if r is not None] == ["test/test_a.py::test_kept"]


def test_a_delta_capture_whose_records_match_no_delta_test_stops(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Records the delta cannot place are an error, never dropped: here pytest is left to pick
    its rootdir again (the fault above), so every node id carries the tree's folder name."""
    from testcurator.errors import ExecutionError
    from testcurator.memory import capture_shards
    from testcurator.memory.stage import CaptureRun, _captured_delta
    from testcurator.runner.shards.executors import LocalExecutor

    monkeypatch.setattr(capture_shards, "tree_options", lambda root, work: [])
    root = tmp_path / "tree"
    (root / "test").mkdir(parents=True)
    (root / "test" / "test_a.py").write_text("def test_kept():\n    pass\n")
    with pytest.raises(ExecutionError, match=r"recorded 1 instance\(s\) that match no delta test \(first: tree/test/"):
        _captured_delta(root, ["test/test_a.py"], {TestKey.of("test/test_a.py", "test_kept")}, tmp_path / "state",
                        tmp_path / "run", CaptureRun(LocalExecutor()))


def _event_log(path: Path, events: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


def _ran(nodeid: str, *phases: tuple[str, str, float], finish: bool = True) -> list[dict[str, object]]:
    out: list[dict[str, object]] = [{"event": "start", "nodeid": nodeid, "identity": {"device": "cpu"}}]
    out += [{"event": "report", "nodeid": nodeid, "when": when, "outcome": outcome, "duration": seconds,
             "longrepr": "E   boom" if outcome == "failed" else None} for when, outcome, seconds in phases]
    return out + ([{"event": "finish", "nodeid": nodeid}] if finish else [])


A, B, C = "test/a.py::T::test_x_cpu", "test/a.py::T::test_y_cpu", "test/b.py::T::test_z_cpu"
OK = (("setup", "passed", 0.5), ("call", "passed", 1.0), ("teardown", "passed", 0.25))
FAILED = (("setup", "passed", 0.5), ("call", "failed", 2.0), ("teardown", "passed", 0.5))


@pytest.mark.parametrize(("events", "returncode", "clean"), [
    ([{"event": "collected", "nodeids": [A, B]}, *_ran(A, *OK), *_ran(B, *FAILED)], 1, True),
    # a test that started and never finished: its process died under it
    ([{"event": "collected", "nodeids": [A, B]}, *_ran(A, *OK), *_ran(B, OK[0], finish=False)], 1, False),
    # a collected test that never ran, and no test died: pytest stopped early
    ([{"event": "collected", "nodeids": [A, B, C]}, *_ran(A, *OK), *_ran(B, *OK)], 0, False),
    # a file that did not import is evidence, not a fault
    ([{"event": "collected", "nodeids": [A], "rootdir": "/src"},
      {"event": "collect_error", "nodeid": "test/b.py", "longrepr": "E x"},
      *_ran(A, *OK)], 1, True),
    ([], 0, False),  # no selection written: the plugin did not run
    ([{"event": "collected", "nodeids": [A]}, *_ran(A, *OK)], 4, False),  # a usage error
])
def test_one_scan_agrees_with_the_runners_fold_on_clean_passes(tmp_path: Path, events: list[dict[str, object]],
                                                                 returncode: int, clean: bool) -> None:
    log = _event_log(tmp_path / "events.jsonl", events)
    (tmp_path / "capture.log").write_text("", encoding="utf-8")
    scan = scan_events(log)
    fold = EventFold()
    for source, event in EventTail(log).poll():
        fold.feed(source, event)
    assert scan.clean(returncode) is clean
    if clean:  # a pass the scan calls clean is one the runner finds no fault in
        assert pass_fault(returncode, fold, tmp_path / "capture.log") is None
    # durations: every finished test with the sum of its phases, as the runner's fold has them
    assert {r.nodeid: r.duration for r in scan.records} == {n: r.duration for n, r in fold.done.items()}
    # the files that did not import, as the fold has them (the upgrade decides files by them)
    assert dict(scan.collect_errors) == fold.collect_errors and scan.rootdir == fold.rootdir


def test_the_scan_reads_outcomes_durations_and_stops_at_a_cut_line(tmp_path: Path) -> None:
    log = _event_log(tmp_path / "events.jsonl", [{"event": "collected", "nodeids": [A, B, C]}, *_ran(A, *OK),
                                                 *_ran(B, *FAILED), *_ran(C, ("setup", "skipped", 0.1))])
    with log.open("a", encoding="utf-8") as fh:
        fh.write('{"event": "start", "nodeid": "test/b.py::T::te')  # the process died mid-write
    scan = scan_events(log)
    assert [(r.nodeid, r.outcome, r.device, r.duration) for r in scan.records] == [
        (A, "passed", "cpu", 1.75), (B, "failed", "cpu", 3.0), (C, "skipped", "cpu", 0.1)]
    assert scan.clean(1)


@pytest.mark.slow
def test_a_capture_goes_on_past_xdists_default_limit_of_dead_workers(tmp_path: Path) -> None:
    # xdist stops scheduling after 4 dead workers per worker: holdout test_modules' gradchecks
    # that the capture's timeout killed left the file's last 272 kept instances unrun.
    from testcurator.memory.capture_shards import run_capture
    from testcurator.plugin.oprecord import read_records
    from testcurator.runner.shards.executors import LocalExecutor

    root = _tree(tmp_path, {"test_dying.py": "import os\nimport pytest\n\n@pytest.mark.parametrize('n', range(10))\n"
                                             "def test_dies(n):\n    os._exit(3)\n\ndef test_zz_after():\n    assert 1\n"})
    out, died = tmp_path / "captured.jsonl", set()
    assert run_capture(root, ["test/test_dying.py"], out, tmp_path / "work", state_dir=tmp_path / "state",
                       executor=LocalExecutor(), workers=2, died=died)
    assert {r.nodeid for r in read_records(out) if r is not None} == {"test/test_dying.py::test_zz_after"}
    assert died == {f"test/test_dying.py::test_dies[{n}]" for n in range(10)}
