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


def _rec(test: str, outcome: str, generic: str | None = None) -> TestRecord:
    return TestRecord(f"{FILE}::TestACPU::{test}_cpu_float32", outcome, generic=generic or f"TestA::{test}")


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
    records = [_rec("test_same", "passed"), _rec("test_now_xfail", "failed"), _rec("test_now_excluding", "passed")]
    reuse = plan(records, draft, final, tmp_path, tmp_path / "exec.jsonl")
    assert reuse is not None
    assert reuse.reused == {TestKey.of(FILE, "TestA::test_same")}
    assert reuse.rerun == {TestKey.of(FILE, "TestA::test_now_xfail"), TestKey.of(FILE, "TestA::test_now_excluding")}
    assert [(r.nodeid, r.outcome, r.source) for r in reuse.records] == [
        (records[0].nodeid, "passed", str(tmp_path / "exec.jsonl"))]
    # a record that belongs to no test (a file that did not collect): the whole verification runs
    assert plan([*records, TestRecord(FILE, "error")], draft, final, tmp_path, tmp_path / "exec.jsonl") is None
