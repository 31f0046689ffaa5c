"""The verification takes the draft's results of the tests whose final entry is the draft's
mandatory one, and runs the others."""

from __future__ import annotations

from pathlib import Path

from testcurator.pipelines.nightly.reverify import plan
from testcurator.runner.results.records import TestRecord
from testcurator.vocab import TestKey

FILE = "test/test_a.py"


def _config(path: Path, entries: str) -> Path:
    path.mkdir(parents=True)
    (path / "test_a.yaml").write_text(f"""test_suite_config:
  files:
    - path: ${{TORCH_ROOT}}/{FILE}
      tests:
{entries}""", encoding="utf-8")
    return path


def _rec(test: str, outcome: str, generic: str | None = None, dtype: str = "float32") -> TestRecord:
    return TestRecord(f"{FILE}::TestACPU::{test}_cpu_{dtype}", outcome, generic=generic or f"TestA::{test}",
                      device="cpu", dtype=dtype)


def test_a_mandatory_test_whose_entry_did_not_change_is_not_run_again(tmp_path: Path) -> None:
    (tmp_path / "test").mkdir()
    (tmp_path / FILE).write_text("class TestA:\n    pass\n", encoding="utf-8")
    draft = _config(tmp_path / "draft", """        - names: [TestA::test_same, TestA::test_now_xfail, TestA::test_now_excluding]
          mode: mandatory_success
""")
    final = _config(tmp_path / "final", """        # confirmed
        - names: [TestA::test_same]
          mode: mandatory_success
        # the draft failed it
        - names: [TestA::test_now_xfail]
          mode: xfail_strict
        # refine left out a dtype the draft failed
        - names: [TestA::test_now_excluding]
          mode: mandatory_success
          edits:
            dtypes:
              exclude:
                - name: float16
""")
    records = [_rec("test_same", "passed"), _rec("test_now_xfail", "failed"), _rec("test_now_excluding", "passed"),
               _rec("test_now_excluding", "failed", dtype="float16")]
    reuse = plan(records, draft, final, tmp_path, tmp_path / "exec.jsonl")
    assert reuse is not None
    assert reuse.reused == {TestKey.of(FILE, "TestA::test_same")}
    assert reuse.rerun == {TestKey.of(FILE, "TestA::test_now_xfail")}
    # The changed entry's float32 instance passed as mandatory and stays mandatory: it stands;
    # its float16 instance, now excluded, runs again (and is skipped there), by its instance key.
    assert [(r.nodeid, r.outcome, r.source) for r in reuse.records] == [
        (records[0].nodeid, "passed", str(tmp_path / "exec.jsonl")),
        (records[2].nodeid, "passed", str(tmp_path / "exec.jsonl"))]
    assert reuse.instances == ((f"{FILE}::TestA::test_now_excluding_cpu_float16", "TestA::test_now_excluding"),)
    # a record that belongs to no test (a file that did not collect): the whole verification runs
    assert plan([*records, TestRecord(FILE, "error")], draft, final, tmp_path, tmp_path / "exec.jsonl") is None


def test_a_changed_entry_that_adds_dtypes_or_passed_only_on_retry_runs_whole(tmp_path: Path) -> None:
    (tmp_path / "test").mkdir()
    (tmp_path / FILE).write_text("class TestA:\n    pass\n", encoding="utf-8")
    draft = _config(tmp_path / "draft", """        - names: [TestA::test_include, TestA::test_flaky]
          mode: mandatory_success
""")
    final = _config(tmp_path / "final", """        # a dtype upstream does not list: the draft never ran its instances
        - names: [TestA::test_include]
          mode: mandatory_success
          edits:
            dtypes:
              include:
                - name: float64
        - names: [TestA::test_flaky]
          mode: mandatory_success
          edits:
            dtypes:
              exclude:
                - name: float16
""")
    flaky = TestRecord(f"{FILE}::TestACPU::test_flaky_cpu_float32", "passed", generic="TestA::test_flaky",
                       device="cpu", dtype="float32", attempts=2, flaky=True)
    reuse = plan([_rec("test_include", "passed"), flaky], draft, final, tmp_path, tmp_path / "exec.jsonl")
    assert reuse is not None
    assert reuse.rerun == {TestKey.of(FILE, "TestA::test_include"), TestKey.of(FILE, "TestA::test_flaky")}
    assert reuse.records == () and reuse.instances == ()
