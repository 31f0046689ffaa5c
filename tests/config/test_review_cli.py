"""`testcurator review` end to end: paths, git revisions, formats, the shrink gate."""

from __future__ import annotations

import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from testcurator.cli.main import main

CONFIG = """test_suite_config:
  files:
    - path: ${{TORCH_ROOT}}/test/test_a.py
      unlisted_test_mode: skip
      tests:
        # {why}
        - names: [TestA::test_one, TestA::test_two]
          mode: {mode}
"""


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e",
           "HOME": str(repo), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "configs").mkdir(parents=True)
    git(repo, "init", "-q")
    (repo / "configs" / "a.yaml").write_text(CONFIG.format(why="Green on the backend.", mode="mandatory_success"))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    (repo / "configs" / "a.yaml").write_text(CONFIG.format(why="Crashes since the upgrade.", mode="skip"))
    git(repo, "commit", "-qam", "two")
    # The work tree then differs from both revisions: review must read git, not files.
    (repo / "configs" / "a.yaml").write_text(CONFIG.format(why="Work in progress.", mode="xfail"))
    return repo


def test_git_revisions_markdown(repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "review.md"
    code = main(["review", "HEAD~1:configs/", "HEAD:configs", "--repo", str(repo), "--format", "markdown", "--out", str(out)])
    assert code == 0
    md = out.read_text()
    assert "| ~✖ | `TestA::test_one` | changed: mode, reason | mandatory_success -> skip |" in md
    assert "Crashes since the upgrade. (was: Green on the backend.)" in md
    assert "| new a.yaml:7 / old a.yaml:7 |" in md
    # the ten-second summary comes first, then the lost tests, then the legend
    lines = md.splitlines()
    assert lines[2] == "**2 of 2 mandatory_success test(s) lose that mode; 0 added, 0 removed, 2 changed test(s) in 1 file(s)**"
    assert lines[4].startswith("> ✖ **mandatory_success lost (2)**: `${TORCH_ROOT}/test/test_a.py::TestA::test_one`")
    assert lines[6].startswith("<sub>Legend: ")
    assert (repo / "configs" / "a.yaml").read_text().count("Work in progress.") == 1  # work tree untouched
    assert git(repo, "status", "--porcelain").strip() == "M configs/a.yaml"


def test_revision_against_work_tree_html(repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "review.html"
    assert main(["review", "HEAD:configs", str(repo / "configs"), "--repo", str(repo), "--format", "html", "--out", str(out)]) == 0
    page = out.read_text()
    HTMLParser().feed(page)
    assert "skip -&gt; xfail" in page and "Work in progress." in page


@pytest.mark.parametrize(("threshold", "code"), [("1", 1), ("2", 0), ("50%", 1), ("100%", 0)])
def test_shrink_gate_exit_codes(repo: Path, threshold: str, code: int, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["review", "HEAD~1:configs", "HEAD:configs", "--repo", str(repo), "--format", "json",
            "--fail-if-mandatory-shrinks-by", threshold]
    assert main(args) == code
    captured = capsys.readouterr()
    assert '"mandatory_lost": 2' in captured.out
    assert ("review gate: mandatory_success shrank by 2" in captured.err) == (code == 1)


def test_terminal_output(repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "220")  # one table row per line
    assert main(["review", "HEAD~1:configs", "HEAD:configs", "--repo", str(repo)]) == 0
    out = capsys.readouterr().out
    assert "TestA::test_two" in out and "mandatory_success -> skip" in out


@pytest.mark.parametrize(
    "args",
    [
        ["review", "nope/", "nope2/"],
        ["review", "HEAD~9:configs", "HEAD:configs"],
        ["review", "HEAD:configs", "HEAD:configs", "--format", "pdf"],
        ["review", "HEAD:missing", "HEAD:configs"],
    ],
)
def test_bad_input_exits_2(repo: Path, args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo)
    assert main(args) == 2


def test_rerun_is_byte_identical(repo: Path, tmp_path: Path) -> None:
    outs = []
    for i in range(2):
        out = tmp_path / f"r{i}.html"
        assert main(["review", "HEAD~1:configs", "HEAD:configs", "--repo", str(repo), "--format", "html", "--out", str(out)]) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


NARROWED = """test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test/test_a.py
      tests:
        # Green on the backend.
        - names: [TestA::test_one]
          mode: mandatory_success
          edits: {dtypes: {exclude: [{name: float16}]}}
        # Green on the backend.
        - names: [TestA::test_two]
          mode: mandatory_success
"""


def test_the_gate_counts_a_new_exclusion_and_changes_are_grouped_by_cause(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    old, out = tmp_path / "old", tmp_path / "out"
    (old).mkdir()
    (out / "configs").mkdir(parents=True)
    (old / "a.yaml").write_text(NARROWED.replace("\n          edits: {dtypes: {exclude: [{name: float16}]}}", ""))
    (out / "configs" / "a.yaml").write_text(NARROWED)
    # A run's report beside the new configs says what changed since the run before.
    (out / "report.json").write_text(json.dumps({"since": {
        "previous": {"run_id": "nightly-1"}, "identity": {"backend": ["b1", "b2"]},
        "regressions": [{"test": "test/test_a.py::TestA::test_one", "cause": "backend changed (b1 -> b2)"}]}}))
    code = main(["review", str(old), str(out / "configs"), "--format", "markdown", "--fail-if-mandatory-shrinks-by", "0"])
    captured = capsys.readouterr()
    assert code == 1 and "1 lost the mode" not in captured.err and "0 lost the mode, 1 gained an exclusion" in captured.err
    assert "0 of 2 mandatory_success test(s) lose that mode, 1 keep it with a new exclusion" in captured.out
    assert ("- regression: backend changed (b1 -> b2) (1): `${TORCH_ROOT}/test/test_a.py::TestA::test_one`"
            in captured.out)
    assert main(["review", str(old), str(out / "configs"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["causes"] == [["${TORCH_ROOT}/test/test_a.py::TestA::test_one", "regression: backend changed (b1 -> b2)"]]
