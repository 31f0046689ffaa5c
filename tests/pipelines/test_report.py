"""The run report's pieces: reasons grouped with counts, stage order, the run's identity."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from testcurator.pipelines.nights.identity import upstream_revision
from testcurator.pipelines.report import finish_report, held_back, instance_reasons, outcome_reason
from testcurator.pipelines.report_md import markdown, ordered_timings
from testcurator.runner.results.records import TestRecord


def test_stage_times_in_pipeline_order_with_a_total() -> None:
    timings = {"verify": 13.361, "bucket": 0.123, "emit": 0.108, "memory": 21.98, "refine": 25.71, "scope": 0.004,
               "zeta": 1.0}
    out = ordered_timings(timings)
    assert list(out) == ["scope", "memory", "bucket", "refine", "emit", "verify", "zeta", "total"]
    assert out["total"] == pytest.approx(62.286)


def test_held_back_tests_grouped_by_reason_most_common_first() -> None:
    configs = {"test/test_a.py": [("TestA::t1", "skip", "needs aten::foo"), ("TestA::t2", "skip", "needs aten::foo"),
                                  ("TestA::t3", "skip", "crashes"), ("TestA::t4", "xfail", "numerics"),
                                  ("TestA::t5", "mandatory_success", "green")]}
    groups = held_back(configs)
    assert set(groups) == {"skip", "xfail"}
    assert groups["skip"] == [{"reason": "needs aten::foo", "count": 2, "tests": ["test/test_a.py::TestA::t1", "test/test_a.py::TestA::t2"]},
                              {"reason": "crashes", "count": 1, "tests": ["test/test_a.py::TestA::t3"]}]


def test_instances_grouped_by_pytest_reason() -> None:
    records = [TestRecord("a::x_float64", "skipped", failure_text="Skipped: dtype float64 is not in supported_dtypes (/c/a.yaml)"),
               TestRecord("a::y_float64", "skipped", failure_text="dtype float64 is not in supported_dtypes\nmore"),
               TestRecord("a::z", "xfailed", failure_text="numerics differ (/c/a.yaml:22:11)"), TestRecord("a::w", "passed")]
    groups = instance_reasons(records)
    assert groups["skipped"] == [{"reason": "dtype float64 is not in supported_dtypes", "count": 2,
                                  "tests": ["a::x_float64", "a::y_float64"]}]
    assert groups["xfailed"][0]["reason"] == "numerics differ"


@pytest.mark.parametrize(("record", "reason"), [
    (TestRecord("a::x", "failed", evidence="Could not run 'aten::foo'\nmore", failure_text="E   boom"), "Could not run 'aten::foo'"),
    (TestRecord("a::x", "xfailed", failure_text="self = <T>\n\n    def f():\nE       NotImplementedError: aten::bar\nE   more"),
     "NotImplementedError: aten::bar"),
    (TestRecord("a::x", "xfailed", failure_text="self = <T>\n... [900 characters cut] ...\nfunctional.py:2987: NotImplementedError"),
     "functional.py:2987: NotImplementedError"),
    (TestRecord("a::x", "skipped", failure_text="Skipped: needs cuda"), "needs cuda"),
    (TestRecord("a::x", "passed", failure_text="ignored"), ""),
])
def test_outcome_reason_is_one_telling_line(record: TestRecord, reason: str) -> None:
    assert outcome_reason(record) == reason


def test_upstream_revision_from_git_or_the_test_sources(tmp_path: Path) -> None:
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "test_a.py").write_text("x = 1\n")
    plain = upstream_revision(tmp_path)
    assert plain.startswith("test tree ") and plain.endswith(" (not a git checkout)")
    (tmp_path / "test" / "test_a.py").write_text("x = 2\n")
    assert upstream_revision(tmp_path) != plain  # a changed test file outside git is a changed tree
    (tmp_path / "version.txt").write_text("2.13.0a0\n")
    assert upstream_revision(tmp_path).startswith("version.txt 2.13.0a0, test tree ")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e",
           "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, env=env)
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert upstream_revision(tmp_path) == head
    (tmp_path / "version.txt").write_text("changed\n")
    dirty = upstream_revision(tmp_path)
    assert dirty.startswith(head + "+dirty:")
    (tmp_path / "version.txt").write_text("changed again\n")
    assert upstream_revision(tmp_path) not in (dirty, head)  # another local change, another revision
    (tmp_path / "version.txt").write_text("2.13.0a0\n")
    sub = tmp_path / "tree"
    sub.mkdir()
    assert upstream_revision(sub) == f"{head} (of the repository at {tmp_path})"  # clean under sub/, not committed
    (sub / "test_a.py").write_text("x = 1\n")
    for args in (["add", "-A"], ["commit", "-qm", "sub"]):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, env=env)
    folder = upstream_revision(sub)
    assert folder.startswith("tree ") and folder.endswith(f" (a folder of the repository at {tmp_path})")
    (tmp_path / "version.txt").write_text("elsewhere\n")  # a commit outside the folder: the same tree
    for args in (["add", "-A"], ["commit", "-qm", "outside"]):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, env=env)
    assert upstream_revision(sub) == folder


def _data(verify: dict[str, object] | None) -> dict[str, object]:
    return {"backend": "curatedev", "device": "curatedev", "torch_root": "/t", "decided_by": "refine",
            "run": {"torch_version": "2.13.0", "upstream_revision": "abc123", "date": "2026-12-01T00:00:00+00:00",
                    "command": None, "exit_code": None},
            "totals": {"mandatory_success": 2, "xfail": 0, "xfail_strict": 0, "skip": 2},
            "per_file": {"test/test_a.py": {"mandatory_success": 2, "skip": 2}},
            "configs": {"test/test_a.py": "configs/test/test_a.yaml"},
            "held_back": held_back({"test/test_a.py": [("TestA::t1", "skip", "needs aten::foo"),
                                                       ("TestA::t2", "skip", "needs aten::foo")]}),
            "held_back_instances": {}, "scope": [], "needs_review": [], "llm_fallbacks": [], "brains": {"offline": 4},
            "usage": {}, "timings_s": ordered_timings({"refine": 2.0, "scope": 1.0}), "emit": {}, "verify": verify}


@pytest.mark.parametrize(("failures", "code", "verdict"), [([], 0, "the curated suite held"),
                                                            (["a::x"], 1, "the curated suite did NOT hold")])
def test_finish_records_command_and_exit_code(tmp_path: Path, failures: list[str], code: int, verdict: str) -> None:
    verify = {"outcomes": {"passed": 3}, "mandatory_failures": failures, "unexpected_passes": []}
    (tmp_path / "report.json").write_text(json.dumps(_data(verify)))
    assert finish_report(tmp_path, "testcurator run --torch-root /t") == code
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["run"]["command"] == "testcurator run --torch-root /t" and data["run"]["exit_code"] == code
    md = (tmp_path / "report.md").read_text().splitlines()
    top = "\n".join(md[:20])  # the ten-second summary: verdict, counts, held back, identity
    assert md[2].startswith(f"**{verdict}; verification run: passed 3, {len(failures)} mandatory failure(s)**")
    assert "held back: skip 2, xfail 0, xfail_strict 0; most common reason: needs aten::foo (2)" in top
    for fragment in ("| torch | 2.13.0 |", "| upstream | `/t` at abc123 |", "| date | 2026-12-01T00:00:00+00:00 |",
                     "| command | `testcurator run --torch-root /t` |", f"| exit code | {code} |", "| time | 3.0 s |"):
        assert fragment in top, fragment


def test_markdown_links_configs_and_orders_stages() -> None:
    md = markdown(_data(None))
    assert "| test/test_a.py | [configs/test/test_a.yaml](configs/test/test_a.yaml) | 2 | 0 | 0 | 2 |" in md
    assert "- **2**: needs aten::foo\n  e.g. `test/test_a.py::TestA::t1`, `test/test_a.py::TestA::t2`\n" in md
    # prose wraps at spaces; no line of the report is over 200 characters, and no usage line when nothing was used
    assert max(len(line) for line in md.splitlines()) <= 200 and "- usage:" not in md
    assert md.index("| scope | 1.0 |") < md.index("| refine | 2.0 |") < md.index("| **total** | 3.0 |")
    assert "**the command has not finished**" in md


def test_an_infrastructure_failure_in_the_verification_run_exits_3(tmp_path: Path) -> None:
    verify = {"outcomes": {}, "mandatory_failures": [], "unexpected_passes": [],
              "infrastructure": ["pytest was given a bad command line (usage error) (exit 4)"]}
    (tmp_path / "report.json").write_text(json.dumps(_data(verify)))
    assert finish_report(tmp_path, "testcurator run") == 3
    md = (tmp_path / "report.md").read_text()
    assert "could not be checked (infrastructure failure)" in md and "- infrastructure failures: 1" in md


def test_failures_and_unexpected_passes_are_listed_under_their_own_headings() -> None:
    """The mandatory failures were once listed under "unexpected passes (xfail)"."""
    verify = {"outcomes": {"error": 1, "xpassed": 1}, "mandatory_failures": ["test/test_b.py"],
              "unexpected_passes": ["test/test_a.py::TestA::t1_cpu"]}
    lines = markdown(_data(verify)).splitlines()
    failures = lines.index("- mandatory_success failures (and strict unexpected passes): 1")
    passes = lines.index("- unexpected passes (xfail): 1")
    assert lines[failures + 1] == "  - `test/test_b.py`"
    assert lines[passes + 1] == "  - `test/test_a.py::TestA::t1_cpu`"


def test_files_that_do_not_import_are_listed() -> None:
    data = {**_data(None), "memory": {"import_errors": {"test/test_old.py": "ImportError: cannot import name 'gone'"}}}
    md = markdown(data)
    assert "## Files that do not import (1): skipped as a whole, needs review" in md
    assert "- `test/test_old.py`: ImportError: cannot import name 'gone'" in md


def test_a_whole_file_under_review_is_counted_and_named_as_a_file() -> None:
    """The summary's "needs review" counts what the sections below mark so (issue 22: "needs
    review: 0" above a file "skipped as a whole, needs review")."""
    item = {"file": "test/test_old.py", "test": None, "mode": "skip", "missing": [],
            "reason": "the whole file is skipped: it does not import (ImportError: cannot import name 'gone')"}
    md = markdown({**_data(None), "needs_review": [item]})
    assert "- needs review: 1;" in md
    assert "- `test/test_old.py` (skip): the whole file is skipped: it does not import" in md


def test_the_capture_section_says_what_ran_and_what_was_left_out_and_why() -> None:
    capture = {"instances": 6435, "kept": 175, "projected": 137, "files_captured": 2, "files_reused": 0,
               "estimate_s": 22.8, "budget_s": None,
               "left_out": {"another dtype of a captured kind (projected)": 137, "not instantiated on the device": 6121,
                            "skipped at collection upstream": 2}}
    md = markdown({**_data(None), "memory": {"capture": capture}})
    section = md[md.index("## Op capture on CPU"):md.index("## Scope")]
    assert "- ran 175 of the 6435 CPU instance(s) of the kept files (estimated 22.8 CPU s)" in section
    assert "- left out, not instantiated on the device: 6121" in section
    assert "- left out, skipped at collection upstream: 2" in section
    assert "reused from an earlier capture (same file, selection and torch): 0" in section
    assert "## Op capture on CPU" not in markdown(_data(None))  # --no-capture-ops: no section
