"""No silent green: a pytest that did not do its job is an ``infrastructure`` record.

Each case is a real pytest subprocess that fails in one way pytest can fail without a
test failing: before ``runner/reconcile.py`` every one of them gave an empty (or short)
table and nothing else.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from testcurator.runner.command import RunSpec
from testcurator.runner.execute import execute
from testcurator.runner.results.records import TestRecord
from testcurator.runner.verdict import HELD, INFRASTRUCTURE_FAILED, NOT_HELD, verdict
from testcurator.vocab import INFRASTRUCTURE

QUIET_PLUGINS = ("-p", "no:langsmith_plugin", "-p", "no:hypothesispytest", "-p", "no:anyio")
TESTS = "def test_a():\n    pass\n\ndef test_b():\n    pass\n"

# (case, files written beside the test file, extra pytest args, what pytest's message says)
FAULTS = [
    ("usage error", {}, ("--no-such-option",), "unrecognized arguments"),
    ("broken pytest.ini", {"pytest.ini": "[pytest]\naddopts = --bogus-addopt\n"}, (), "--bogus-addopt"),
    ("internal error", {"conftest.py": "def pytest_collection_finish(session):\n    raise RuntimeError('boom in a hook')\n"},
     (), "boom in a hook"),
    ("interrupt", {"conftest.py": "def pytest_collection_finish(session):\n    raise KeyboardInterrupt\n"},
     (), "KeyboardInterrupt"),
    ("selection not run", {"conftest.py": "def pytest_runtestloop(session):\n    return True\n"},
     (), "2 of 2 selected test(s) have no result"),
    ("JUnit cut short", {"conftest.py": textwrap.dedent("""
        import pytest

        @pytest.hookimpl(trylast=True)
        def pytest_unconfigure(config):
            path = config.option.xmlpath
            if path:
                with open(path, "w") as fh:
                    fh.write('<?xml version="1.0"?><testsuites><testsuite name="pytest"><testcase ')
        """)}, (), "JUnit XML missing or cut short"),
]


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    (tmp_path / "test_two.py").write_text(TESTS, encoding="utf-8")
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path / "test_two.py"


def _execute(tmp_path: Path, path: Path, extra: tuple[str, ...] = ()) -> list[TestRecord]:
    spec = RunSpec(out_dir=tmp_path / "out", paths=(str(path),), rootdir=tmp_path, retries=0,
                   extra_args=QUIET_PLUGINS + extra)
    return list(execute(spec).records)


@pytest.mark.parametrize(("files", "extra", "message"), [case[1:] for case in FAULTS], ids=[case[0] for case in FAULTS])
def test_a_pytest_that_did_not_do_its_job_is_an_infrastructure_failure(
        tmp_path: Path, files: dict[str, str], extra: tuple[str, ...], message: str) -> None:
    records = _execute(tmp_path, _tree(tmp_path, files), extra)
    infra = [r for r in records if r.failure_class == INFRASTRUCTURE]
    assert len(infra) == 1, records
    assert message in (infra[0].evidence or "") + (infra[0].failure_text or "")
    assert infra[0].outcome == "error"
    result = verdict(records)
    assert result.code == INFRASTRUCTURE_FAILED
    assert any(line.startswith("INFRASTRUCTURE FAILURE") for line in result.lines("out"))
    # In the results the run writes, not only in memory.
    assert INFRASTRUCTURE in (tmp_path / "out" / "results.jsonl").read_text(encoding="utf-8")


def test_a_healthy_run_has_no_infrastructure_record(tmp_path: Path) -> None:
    records = _execute(tmp_path, _tree(tmp_path, {}))
    assert sorted(r.outcome for r in records) == ["passed", "passed"]
    assert verdict(records).code == HELD


def test_a_relative_out_dir_still_runs_the_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pytest runs in the rootdir: a relative --out once named an @argsfile it could not find.
    (tmp_path / "tree").mkdir()
    path = _tree(tmp_path / "tree", {})
    caller = tmp_path / "caller"
    caller.mkdir()
    monkeypatch.chdir(caller)
    spec = RunSpec(out_dir=Path("ex"), paths=(str(path),), rootdir=tmp_path / "tree", retries=0, extra_args=QUIET_PLUGINS)
    records = execute(spec).records
    assert [r.outcome for r in records] == ["passed", "passed"]
    assert (caller / "ex" / "results.jsonl").is_file()


def _rec(nodeid: str, outcome: str, failure_class: str | None = None) -> TestRecord:
    return TestRecord(nodeid=nodeid, outcome=outcome, failure_class=failure_class, evidence="why")


@pytest.mark.parametrize(("records", "allow_empty", "code"), [
    ([_rec("t.py::test_a", "passed"), _rec("t.py::test_b", "xfailed"), _rec("t.py::test_c", "skipped")], False, HELD),
    ([_rec("t.py::test_a", "passed"), _rec("t.py::test_b", "failed", "unknown")], False, NOT_HELD),
    ([_rec("t.py::test_a", "crashed", "crash")], False, NOT_HELD),
    ([_rec("t.py::test_a", "timeout", "timeout")], False, NOT_HELD),
    ([_rec("t.py::test_a", "failed", "unknown"), _rec("<pytest run-1>", "error", INFRASTRUCTURE)], False,
     INFRASTRUCTURE_FAILED),
    ([], False, INFRASTRUCTURE_FAILED),
    ([], True, HELD),
])
def test_verdict_codes(records: list[TestRecord], allow_empty: bool, code: int) -> None:
    result = verdict(records, allow_empty=allow_empty)
    assert result.code == code
    assert result.lines("here")[-1].endswith(f"exit {code}); results: here")


def test_the_last_lines_name_what_failed() -> None:
    lines = verdict([_rec("t.py::T::test_x", "failed", "unsupported_op")]).lines("out/results.jsonl")
    assert lines[0].startswith("NOT HELD: 1 mandatory failure")
    assert "t.py::T::test_x: failed [unsupported_op] why" in lines[1]
    assert "did NOT hold" in lines[-1] and "out/results.jsonl" in lines[-1]


def test_an_internal_error_is_told_by_the_line_that_raised_not_by_pytests_traceback(tmp_path: Path) -> None:
    # A tree's conftest hook that breaks (PyTorch's shard helper from another commit did): the
    # record says where and what in one line, and where pytest's whole output is.
    hook = "import os\n\n\ndef pytest_collection_finish(session):\n    session.config.getoption('print_items')\n"
    records = _execute(tmp_path, _tree(tmp_path, {"conftest.py": hook}))
    infra = [r for r in records if r.failure_class == INFRASTRUCTURE]
    assert len(infra) == 1
    text = (infra[0].failure_text or "").splitlines()
    assert len(text) == 2 and "INTERNALERROR" not in "\n".join(text)
    assert text[0].endswith("conftest.py:5: ValueError: no option named 'print_items' (in pytest_collection_finish)")
    assert text[1].startswith("(pytest's whole output: ") and "INTERNALERROR" in Path(text[1][24:-1]).read_text()
