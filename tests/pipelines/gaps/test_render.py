"""The board's four formats, the files a finished run gets, and the report's section."""

from __future__ import annotations

import json
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from testcurator.pipelines.gaps.files import BOARD_FILES, compute, report_section, write_board
from testcurator.pipelines.gaps.render import render

DOT = "NotImplementedError: Could not run 'aten::dot' with arguments from the 'gapdev' backend."
NASTY = "test_</script><b>x"  # a test name that must not end the page's script nor become markup


@pytest.fixture()
def run_dir(gapkit: Any, make_run: Callable[[Any], Path]) -> Path:
    k = gapkit
    return make_run(k.Run(
        verify=[k.skipped("test_ops", "op matmul excluded by edits", op="matmul"), k.rec(NASTY, "xfailed"),
                k.skipped("test_half", "dtype float16 is not in supported_dtypes", dtype="float16")],
        decisions=[k.decision("test_ops", "mandatory_success"), k.decision(NASTY, "xfail_strict")],
        probe={"aten::dot(float32,float32)": ("missing_kernel", DOT)},
        capture=[k.captured("test_ops", ["aten::dot(float32,float32)"], op="matmul"),
                 k.captured(NASTY, ["aten::dot(float32,float32)"])]))


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.urls += [v or "" for k, v in attrs if k in ("src", "href")]


def test_json_is_a_list_of_gaps_with_the_fields_the_issue_names(run_dir: Path) -> None:
    data = json.loads(render(compute(run_dir), "json"))
    assert isinstance(data, list)
    first = data[0]
    assert {"op", "status", "dtypes", "tests", "instances", "alone", "shared_with"} <= set(first)
    assert first["op"] == "aten::dot" and first["tests"] == sorted(["TestGaps::test_ops", f"TestGaps::{NASTY}"])
    assert data[1]["op"] is None and data[1]["dtypes"] == ["float16"]


def test_text_and_markdown_list_the_ranked_gaps(run_dir: Path) -> None:
    board = compute(run_dir)
    text = render(board, "text")
    assert text.splitlines()[0].startswith("What to implement next on gapdev (run run-1): 1 op/feature gap(s)")
    assert "aten::dot" in text and "enable: testcurator enable-op matmul --config " in text
    md = render(board, "markdown").splitlines()
    assert md[0] == "# What to implement next"
    assert any(line.startswith("| 1 | `aten::dot` | missing kernel | float32 | 2 | 0 | 2 |") for line in md)


def test_the_page_is_one_self_contained_file(run_dir: Path) -> None:
    page = render(compute(run_dir), "html")
    tags = _Tags()
    tags.feed(page)
    assert tags.tags.count("script") == 3 and "table" in tags.tags  # data, status words, code
    assert not [u for u in tags.urls if "://" in u]  # no network
    assert "b" not in tags.tags  # the test name is data, never markup
    assert page.count("</script>") == 3


def test_a_finished_run_gets_its_board_files_and_a_report_section(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    written = write_board(run_dir, out)
    assert sorted(p.name for p in written) == sorted(BOARD_FILES.values())
    lines = report_section(run_dir, out)
    assert lines[0] == "## What to implement next"
    assert any("(gaps.html)" in line for line in lines)
    assert sum(line.startswith("| 1 |") for line in lines) == 1


def test_the_report_section_of_a_run_without_a_capture_says_why(gapkit: Any, make_run: Callable[[Any], Path],
                                                                 tmp_path: Path) -> None:
    lines = report_section(make_run(gapkit.Run(captured=False)), tmp_path)
    assert lines[0] == "## What to implement next" and "no CPU op capture" in lines[2]
    assert not (tmp_path / "gaps.html").exists()
