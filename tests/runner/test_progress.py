"""Progress names its phase from the first second: collecting, running, retrying, merging."""

from __future__ import annotations

import io
import textwrap
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import pytest
from rich.console import Console

from testcurator.runner.command import RunSpec
from testcurator.runner.execute import execute
from testcurator.runner.progress import RichProgress, phase_name


@pytest.mark.parametrize(("label", "done", "total", "name"), [
    ("run", 0, None, "collecting"), ("run", 0, 12, "running"), ("run", 3, 12, "running"),
    ("retry1", 0, None, "retrying 1"), ("merging", 0, None, "merging"), ("collecting", 0, None, "collecting"),
])
def test_phase_names(label: str, done: int, total: int | None, name: str) -> None:
    assert phase_name(label, done, total) == name


def test_one_row_per_phase_and_the_cli_row_becomes_the_run(tmp_path: Path) -> None:
    progress = RichProgress(Console(file=io.StringIO(), force_terminal=True, width=120))
    with progress:  # the CLI, before loading the config
        progress.phase("collecting", None)
        assert [t.fields["name"] for t in progress.progress.tasks] == ["collecting"]
        with progress:  # the runner
            progress.phase("run", None)
            progress.update(0, {}, None)
            assert [t.fields["name"] for t in progress.progress.tasks] == ["collecting"]
            progress.update(2, {"passed": 2}, 5)
            progress.phase("retry1", None)
            progress.update(1, {"failed": 1}, 1)
            progress.phase("merging", None)
        assert progress.progress.live.is_started  # the inner exit does not stop the outer display
    assert not progress.progress.live.is_started
    assert [t.fields["name"] for t in progress.progress.tasks] == ["running", "retrying 1", "merging"]
    assert progress.progress.tasks[0].completed == 5  # a finished phase shows full
    assert all(t.finished for t in progress.progress.tasks)  # merging too, once the run ended


class Recording:
    def __init__(self) -> None:
        self.events: list[tuple[str, object, object]] = []

    def phase(self, label: str, total: int | None) -> None:
        self.events.append(("phase", label, total))

    def update(self, done: int, counts: Mapping[str, int], total: int | None = None) -> None:
        self.events.append(("update", done, total))

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        return None


def test_a_real_run_reports_its_phases_in_order(tmp_path: Path) -> None:
    test = tmp_path / "test_once.py"
    test.write_text(textwrap.dedent('''
        from pathlib import Path

        def test_flaky():
            counter = Path(__file__).with_name("counter.txt")
            n = int(counter.read_text()) if counter.exists() else 0
            counter.write_text(str(n + 1))
            assert n >= 1

        def test_ok():
            pass
    '''))
    sink = Recording()
    spec = RunSpec(out_dir=tmp_path / "out", paths=(str(test),), rootdir=tmp_path, timeout=60, retries=1,
                   extra_args=("-p", "no:langsmith_plugin", "-p", "no:hypothesispytest", "-p", "no:anyio"))
    execute(spec, sink)
    phases = [e[1] for e in sink.events if e[0] == "phase"]
    assert phases == ["run", "retry1", "merging"]
    assert sink.events[0] == ("phase", "run", None)  # named before pytest reports anything: collecting
    assert (tmp_path / "out" / "results.jsonl").is_file()


@pytest.mark.slow
def test_the_total_stays_the_count_of_tests_after_a_crash(tmp_path: Path) -> None:
    # Instantiated classes give node ids (TestCrashCPU::...) unlike the instance keys
    # (TestCrash::...): the rerun after the crash must count its tests by key, once.
    test = tmp_path / "test_crash.py"
    test.write_text(textwrap.dedent('''
        import os, signal
        from torch.testing._internal.common_device_type import instantiate_device_type_tests
        from torch.testing._internal.common_utils import TestCase

        class TestCrash(TestCase):
            def test_a(self, device):
                pass

            def test_b(self, device):
                os.kill(os.getpid(), signal.SIGSEGV)

            def test_c(self, device):
                pass

        instantiate_device_type_tests(TestCrash, globals(), only_for="cpu")
    '''))
    sink = Recording()
    spec = RunSpec(out_dir=tmp_path / "out", paths=(str(test),), rootdir=tmp_path, timeout=60, retries=0,
                   extra_args=("-p", "no:langsmith_plugin", "-p", "no:hypothesispytest", "-p", "no:anyio"))
    result = execute(spec, sink)
    assert sorted(r.outcome for r in result.records) == ["crashed", "passed", "passed"]
    totals = {e[2] for e in sink.events if e[0] == "update" and e[2] is not None}
    assert totals == {3}
