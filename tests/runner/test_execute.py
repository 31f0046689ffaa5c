"""The runner through real pytest subprocesses: segfaults, aborts, hangs, killed workers, flakes."""

from __future__ import annotations

import json
import os
import signal
import textwrap
import threading
import time
from pathlib import Path

import pytest

from testcurator.runner.command import RunSpec
from testcurator.runner.execute import REPORT_S, _Pass, execute, merge_retry
from testcurator.runner.results.ingest import load_results
from testcurator.runner.results.records import TestRecord, read_jsonl
from testcurator.sharding import write_test_durations

CRASHES = '''
import ctypes, os, signal

def test_first():
    pass

def test_segv():
    ctypes.string_at(0)

def test_abort():
    os.abort()

def test_exit():
    os._exit(3)

def test_last():
    assert 1 + 1 == 2
'''

HANG = '''
import time

def test_before():
    pass

def test_hang():
    time.sleep(120)

def test_after():
    pass
'''

FLAKY = '''
from pathlib import Path

def test_flaky():
    counter = Path(__file__).with_name("counter.txt")
    n = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(n + 1))
    assert n >= 1, "fails on the first attempt only"

def test_always():
    assert [1, 2] == [1, 3]
'''

WORKERS = '''
import os, signal, time
from pathlib import Path

def test_a(): pass
def test_b(): pass
def test_c(): pass
def test_d(): pass

def test_killed_once():
    marker = Path(__file__).with_name("killed-once")
    if not marker.exists():
        marker.write_text("1")
        os.kill(os.getpid(), signal.SIGKILL)

def test_segv_always():
    os.kill(os.getpid(), signal.SIGSEGV)

def test_e(): pass
def test_f(): pass
'''


def _write(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


# Third-party plugins in this venv cost ~2 s per process start; none matter here.
QUIET_PLUGINS = ("-p", "no:langsmith_plugin", "-p", "no:hypothesispytest", "-p", "no:anyio")


def _run(tmp_path: Path, path: Path, **kwargs: object) -> dict[str, TestRecord]:
    spec = RunSpec(out_dir=tmp_path / "out", paths=(str(path),), rootdir=tmp_path, extra_args=QUIET_PLUGINS,
                   **kwargs)  # type: ignore[arg-type]
    return execute(spec).by_nodeid


@pytest.mark.slow
def test_crashes_are_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    path = _write(tmp_path, "test_crashes.py", CRASHES)
    got = _run(tmp_path, path, timeout=60, retries=0)
    summary = {n.split("::")[1]: (r.outcome, r.failure_class) for n, r in got.items()}
    assert summary == {
        "test_first": ("passed", None), "test_segv": ("crashed", "crash"), "test_abort": ("crashed", "crash"),
        "test_exit": ("crashed", "crash"), "test_last": ("passed", None),
    }
    assert "Fatal Python error: Segmentation fault" in got["test_crashes.py::test_segv"].evidence
    assert "SIGABRT" in got["test_crashes.py::test_abort"].evidence
    assert "exited with code 3" in got["test_crashes.py::test_exit"].evidence
    assert "test_segv" in got["test_crashes.py::test_segv"].failure_text  # faulthandler's stack
    out = tmp_path / "out"
    assert [r.nodeid for r in read_jsonl(out / "results.jsonl")] == list(got)
    reread = {r.nodeid: r.outcome for r in load_results([out / "junit.xml"])}
    assert reread == {n: r.outcome for n, r in got.items()}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tests"]["test_crashes.py::test_segv"]["outcome"] == "crashed"
    assert len(manifest["pytest_commands"]) == 4  # one process per death, plus the first


@pytest.mark.slow
def test_hang_is_a_timeout_and_the_rest_runs(tmp_path: Path) -> None:
    path = _write(tmp_path, "test_hang.py", HANG)
    started = time.monotonic()
    got = _run(tmp_path, path, timeout=2, retries=0)
    assert time.monotonic() - started < 60
    hang = got["test_hang.py::test_hang"]
    assert (hang.outcome, hang.failure_class) == ("timeout", "timeout")
    assert hang.evidence == "Timeout (0:00:02)!"
    assert "time.sleep" in hang.failure_text or "test_hang" in hang.failure_text
    assert got["test_hang.py::test_after"].outcome == "passed"


@pytest.mark.slow
def test_retries_tell_flaky_from_consistent(tmp_path: Path) -> None:
    path = _write(tmp_path, "test_flaky.py", FLAKY)
    got = _run(tmp_path, path, timeout=60, retries=2)
    flaky, always = got["test_flaky.py::test_flaky"], got["test_flaky.py::test_always"]
    assert (flaky.outcome, flaky.flaky, flaky.failure_class, flaky.attempts) == ("passed", True, "transient", 2)
    assert "fails on the first attempt only" in flaky.evidence
    assert (always.outcome, always.flaky, always.attempts) == ("failed", False, 3)
    assert always.failure_class == "unknown" and "AssertionError" in always.evidence


SMALL = """
def test_a(): pass
def test_b(): pass
"""


@pytest.mark.parametrize(("seconds", "xdist"), [(0.1, False), (30.0, True), (None, True)],
                         ids=["small known load", "large known load", "nothing known"])
def test_a_small_known_load_runs_in_one_process(tmp_path: Path, seconds: float | None, xdist: bool) -> None:
    """Two xdist workers would each import and collect again: for a load the durations show
    to be small, one pytest runs it; for a large or unknown one, the workers asked for."""
    path = _write(tmp_path, "test_small.py", SMALL)
    durations = tmp_path / ".test_durations"
    write_test_durations(durations, {} if seconds is None else {"test_small.py::test_a": seconds})
    got = _run(tmp_path, path, timeout=60, retries=0, workers=2, durations=durations)
    assert {r.outcome for r in got.values()} == {"passed"} and len(got) == 2
    [command] = json.loads((tmp_path / "out" / "manifest.json").read_text())["pytest_commands"]
    assert ("-n" in command) is xdist


def test_xdist_worker_deaths(tmp_path: Path) -> None:
    path = _write(tmp_path, "test_workers.py", WORKERS)
    got = _run(tmp_path, path, timeout=60, retries=1, workers=2)
    assert len(got) == 8
    segv, killed = got["test_workers.py::test_segv_always"], got["test_workers.py::test_killed_once"]
    assert (segv.outcome, segv.failure_class, segv.attempts) == ("crashed", "crash", 2)
    assert "Fatal Python error: Segmentation fault" in segv.evidence or "crashed while running" in segv.evidence
    assert (killed.outcome, killed.flaky, killed.failure_class) == ("passed", True, "transient")
    assert "crashed while running 'test_workers.py::test_killed_once'" in killed.evidence
    others = {n: r.outcome for n, r in got.items() if n.split("::")[1] not in ("test_segv_always", "test_killed_once")}
    assert set(others.values()) == {"passed"}


def _kill_when_started(out: Path, nodeid_part: str, stop: threading.Event) -> None:
    # Plays the part of an operator (or OOM killer) killing the process running a test.
    while not stop.is_set():
        for events in (out / "work").glob("run-0.events.jsonl*"):
            if events.name.endswith(".fault"):
                continue
            for line in events.read_text(encoding="utf-8").splitlines():
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line still being written: read it on the next pass
                # The test name, not a substring: "test_slow.py::test_quick" contains "test_slow".
                if event.get("event") == "start" and event["nodeid"].endswith(f"::{nodeid_part}"):
                    os.kill(event["pid"], signal.SIGKILL)
                    return
        time.sleep(0.05)


@pytest.mark.parametrize("workers", [1, 2])
def test_process_killed_from_outside(tmp_path: Path, workers: int) -> None:
    path = _write(tmp_path, "test_slow.py", "import time\n\ndef test_quick():\n    pass\n\n"
                  "def test_slow():\n    time.sleep(30)\n\ndef test_tail():\n    pass\n")
    stop = threading.Event()
    killer = threading.Thread(target=_kill_when_started, args=(tmp_path / "out", "test_slow", stop), daemon=True)
    killer.start()
    try:
        got = _run(tmp_path, path, timeout=60, retries=0, workers=workers)
    finally:
        stop.set()
    slow = got["test_slow.py::test_slow"]
    assert (slow.outcome, slow.failure_class) == ("crashed", "crash")
    assert "SIGKILL" in slow.evidence if workers == 1 else "crashed while running" in slow.evidence
    assert got["test_slow.py::test_tail"].outcome == "passed"


def test_merge_retry_keeps_first_classification() -> None:
    first = {"a::t": TestRecord("a::t", "failed", failure_class="numerical_mismatch", evidence="Mismatched elements: 1 / 2 (50.0%)")}
    again = {"a::t": TestRecord("a::t", "crashed", failure_class="crash", evidence="x")}
    merged = merge_retry(first, again, 2)["a::t"]
    assert (merged.outcome, merged.failure_class, merged.attempts) == ("failed", "numerical_mismatch", 2)


def test_pytest_config_comes_from_the_tree_not_the_state_dir(tmp_path: Path) -> None:
    """The state dir often sits inside the user's project, whose pytest config must not leak in."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-p no_such_plugin_anywhere"\n')
    tree = tmp_path / "tree"
    (tree / "test").mkdir(parents=True)
    (tree / "test" / "test_here.py").write_text("def test_ok():\n    pass\n")
    # Option values that are paths (the config here) count when pytest looks for its rootdir.
    config = project / ".state" / "curate.yaml"
    config.parent.mkdir()
    config.write_text("test_suite_config:\n  unlisted_file_mode: mandatory_success\n  files: []\n")
    spec = RunSpec(out_dir=project / ".state" / "out", paths=(str(tree / "test" / "test_here.py"),), torch_root=tree,
                   config=config, extra_args=QUIET_PLUGINS, timeout=60, retries=0)
    got = {r.nodeid: r for r in execute(spec).records}
    assert list(got) == ["test/test_here.py::test_ok"]  # relative to the tree: its rootdir
    assert got["test/test_here.py::test_ok"].outcome == "passed"


STRICT_XPASS = """
import pytest


@pytest.mark.xfail(strict=True, reason="Could not run 'aten::unfold' with arguments from the 'dev' backend")
def test_now_passes():
    pass
"""


def test_a_strict_xfail_that_passes_is_an_unexpected_pass(tmp_path: Path) -> None:
    """pytest fails it with the xfail's reason as its text; that reason quotes a missing kernel,
    which once made the record read ``failed [unsupported_op] Could not run 'aten::unfold'``."""
    from testcurator.runner.verdict import verdict

    got = _run(tmp_path, _write(tmp_path, "test_xpass.py", STRICT_XPASS), timeout=60, retries=0)
    record = got["test_xpass.py::test_now_passes"]
    assert (record.outcome, record.failure_class) == ("failed", "unexpected_pass")
    assert record.evidence.startswith("passed, but the config expects it to fail (xfail_strict): Could not run")
    result = verdict(got.values())
    assert result.code == 1
    assert any(line.startswith("  test_xpass.py::test_now_passes: unexpected pass: passed, but the config expects")
               for line in result.lines("r"))


def test_a_file_the_config_skips_as_a_whole_has_a_record(tmp_path: Path) -> None:
    """A file that does not import, skipped whole by its config: in results.jsonl as a skip
    with the reason (issue 22: it was only in the JUnit XML pytest wrote)."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "test_broken.py").write_text("from no_such_module import thing\n\ndef test_x():\n    pass\n")
    (tree / "test_fine.py").write_text("def test_y():\n    pass\n")
    config = tmp_path / "c.yaml"
    config.write_text("test_suite_config:\n  unlisted_file_mode: mandatory_success\n  files:\n"
                      "    - path: ${TORCH_ROOT}/test_broken.py\n", encoding="utf-8")
    spec = RunSpec(out_dir=tmp_path / "out", config=config, torch_root=tree, paths=(str(tree / "test_broken.py"),
                   str(tree / "test_fine.py")), timeout=60, retries=0, extra_args=QUIET_PLUGINS)
    got = {r.nodeid: r for r in read_jsonl(execute(spec).out_dir / "results.jsonl")}
    assert got["test_fine.py::test_y"].outcome == "passed"
    broken = got["test_broken.py"]
    assert broken.outcome == "skipped" and "does not import" in (broken.failure_text or "")


MISSING_KERNEL = '''
import pytest


def test_missing_kernel():
    raise NotImplementedError("Could not run 'aten::tanh.out' with arguments from the 'curatedev' backend.")


def test_wrong():
    assert 1 == 2
'''


@pytest.mark.slow
def test_a_missing_kernel_is_not_retried(tmp_path: Path) -> None:
    path = _write(tmp_path, "test_missing.py", MISSING_KERNEL)
    got = _run(tmp_path, path, timeout=60, retries=2)
    missing, wrong = got["test_missing.py::test_missing_kernel"], got["test_missing.py::test_wrong"]
    assert (missing.outcome, missing.failure_class, missing.attempts) == ("failed", "unsupported_op", 1)
    assert (wrong.outcome, wrong.attempts) == ("failed", 3)  # anything else is still retried


GREEDY = '''
import torch


def test_greedy():
    torch.empty(512 * 2**20, dtype=torch.uint8).fill_(1)


def test_modest():
    assert torch.ones(8 * 2**20, dtype=torch.uint8).sum().item() == 8 * 2**20
'''


@pytest.mark.parametrize(("limit", "isolate"), [(None, ()), (128.0, ()), (128.0, ("all",))],
                         ids=["no-limit", "limit", "limit-forked"])
def test_a_test_past_the_memory_limit_fails_as_such_once_and_the_process_goes_on(tmp_path: Path, limit: float | None,
                                                                               isolate: tuple[str, ...]) -> None:
    # Forked (plugin/isolate.py), the child arms its own limit: the zygote it comes from has none.
    path = _write(tmp_path, "test_greedy.py", GREEDY)
    got = _run(tmp_path, path, timeout=60, retries=2, memory_limit_mb=limit, isolate=frozenset(isolate))
    greedy, modest = got["test_greedy.py::test_greedy"], got["test_greedy.py::test_modest"]
    assert modest.outcome == "passed"
    if limit is None:  # 512 MB is no problem without a limit
        assert greedy.outcome == "passed"
        return
    # Not retried: under the same limit it fails the same way.
    assert (greedy.outcome, greedy.failure_class, greedy.attempts) == ("failed", "memory_limit", 1)
    assert greedy.evidence.startswith("testcurator: the test reached its memory limit (it may add 128 MB to ")
    assert "can't allocate memory: you tried to allocate 536870912 bytes" in greedy.evidence


@pytest.mark.slow
def test_a_test_known_to_fail_on_cpu_too_is_not_retried(tmp_path: Path) -> None:
    # The pipeline passes the tests its CPU capture saw fail (upstream test_testing's
    # OpInfoSampleFunctions: 1,162 instances that fail the same way on every device).
    path = _write(tmp_path, "test_missing.py", MISSING_KERNEL.replace("raise NotImplementedError", "assert 0, "))
    got = _run(tmp_path, path, timeout=60, retries=2, settled=frozenset({"test_missing.py::test_missing_kernel"}))
    settled, wrong = got["test_missing.py::test_missing_kernel"], got["test_missing.py::test_wrong"]
    assert (settled.outcome, settled.attempts) == ("failed", 1)
    assert (wrong.outcome, wrong.attempts) == ("failed", 3)


def test_a_killed_runs_event_files_are_not_read_as_this_runs(tmp_path: Path) -> None:
    # run --resume of an interrupted verification: the killed run's worker left its event and
    # fault files under the same invocation name; the holdout's resumed run counted them (exit 3).
    path = _write(tmp_path, "test_two.py", "def test_a(): pass\ndef test_b(): pass\n")
    work = tmp_path / "out" / "work"
    work.mkdir(parents=True)
    stale = {"event": "start", "nodeid": "test_gone.py::test_old", "pid": 1, "time": 0.0}
    (work / "run-0.events.jsonl.gw5").write_text(json.dumps(stale) + "\n", encoding="utf-8")
    (work / "run-0.events.jsonl.gw5.fault").write_text("Fatal Python error: Aborted\n", encoding="utf-8")
    got = _run(tmp_path, path, timeout=60, retries=0)
    assert {n: r.outcome for n, r in got.items()} == {"test_two.py::test_a": "passed", "test_two.py::test_b": "passed"}


class _Updates:
    """A progress sink that keeps every update."""

    def __init__(self) -> None:
        self.updates: list[tuple[int, dict[str, int], int | None]] = []

    def phase(self, label: str, total: int | None) -> None:
        return None

    def update(self, done: int, counts: dict[str, int], total: int | None = None) -> None:
        self.updates.append((done, dict(counts), total))

    def __enter__(self) -> _Updates:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.mark.parametrize("workers", [1, 2])
def test_the_configs_skips_are_settled_at_collection_with_their_reasons(tmp_path: Path, workers: int) -> None:
    """Recorded as skips with the config's reason, in results.jsonl and the runner's JUnit XML,
    without running pytest's protocol; the progress counts only the tests that run."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "test_mix.py").write_text("def test_run():\n    pass\n\ndef test_off():\n    pass\n\n"
                                      "def test_off_too():\n    pass\n", encoding="utf-8")
    config = tmp_path / "c.yaml"
    config.write_text("test_suite_config:\n  files:\n    - path: ${TORCH_ROOT}/test_mix.py\n"
                      "      unlisted_test_mode: skip\n      tests:\n        - names: [test_run]\n"
                      "          mode: mandatory_success\n", encoding="utf-8")
    spec = RunSpec(out_dir=tmp_path / "out", config=config, torch_root=tree, paths=(str(tree / "test_mix.py"),),
                   timeout=60, retries=0, workers=workers, extra_args=QUIET_PLUGINS)
    progress = _Updates()
    out = execute(spec, progress).out_dir
    got = {r.nodeid: r for r in read_jsonl(out / "results.jsonl")}
    assert {n: r.outcome for n, r in got.items()} == {"test_mix.py::test_run": "passed", "test_mix.py::test_off": "skipped",
                                                       "test_mix.py::test_off_too": "skipped"}
    assert "unlisted" in (got["test_mix.py::test_off"].failure_text or "")
    assert (out / "junit.xml").read_text(encoding="utf-8").count("<testcase ") == 3
    work_logs = [p for p in (out / "work").glob("*.events.jsonl*") if not p.name.endswith(".fault")]
    assert sum('"event": "settled"' in p.read_text(encoding="utf-8") for p in work_logs) == 1  # one process logged them
    done, counted, total = progress.updates[-1]
    assert (done, total) == (1, 1) and counted.get("skipped") == 2
    assert {total for _, _, total in progress.updates} <= {None, 1}  # never the settled ones, not even at first


class _Tail:
    """An event tail that hands out one batch of events per poll."""

    def __init__(self, *batches: list[dict[str, object]]) -> None:
        self.batches = list(batches)

    def poll(self) -> list[tuple[Path, dict[str, object]]]:
        return [(Path("ev.jsonl"), e) for e in (self.batches.pop(0) if self.batches else [])]


def _finished(name: str) -> list[dict[str, object]]:
    return [{"event": "start", "nodeid": name}, {"event": "report", "nodeid": name, "when": "call", "outcome": "passed"},
            {"event": "finish", "nodeid": name}]


def test_a_live_pass_recounts_at_most_every_report_interval_and_never_leaves_a_count_behind(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from testcurator.runner.eventlog import EventFold

    now = [1000.0]
    monkeypatch.setattr("testcurator.runner.execute.time.monotonic", lambda: now[0])
    progress = _Updates()
    run = _Pass(RunSpec(out_dir=tmp_path), "run", progress, {})
    fold, tail = EventFold(), _Tail(_finished("t.py::a"), _finished("t.py::b"), [], [])
    run._drain(tail, fold, live=True)
    run._drain(tail, fold, live=True)  # b finished within the interval: not counted yet
    assert [done for done, _, _ in progress.updates] == [1]
    now[0] += REPORT_S
    run._drain(tail, fold, live=True)  # no new event, but b is still uncounted
    run._drain(tail, fold, live=True)  # nothing new: no recount
    assert [done for done, _, _ in progress.updates] == [1, 2]
