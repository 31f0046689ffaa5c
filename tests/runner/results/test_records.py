"""Reading a results file: the records it holds now, however often a run reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from testcurator.errors import BadInputError
from testcurator.runner.results.records import TestRecord, read_jsonl, write_jsonl

NODE = "test/test_a.py::TestACPU::test_x_cpu"


@pytest.mark.parametrize("rewrite", [
    pytest.param(lambda path, text: path.write_text(text, encoding="utf-8"), id="in place"),
    pytest.param(lambda path, text: write_jsonl(path, [TestRecord(NODE, "failed")]), id="atomically"),
])
def test_a_file_read_again_after_a_rewrite_of_the_same_size_says_what_it_holds_now(tmp_path: Path, rewrite) -> None:
    path = tmp_path / "results.jsonl"
    write_jsonl(path, [TestRecord(NODE, "passed")])
    assert [r.outcome for r in read_jsonl(path)] == ["passed"]
    text = path.read_text(encoding="utf-8").replace('"passed"', '"failed"')  # same size, same file
    rewrite(path, text)
    assert [r.outcome for r in read_jsonl(path)] == ["failed"]


def test_a_caller_that_changes_the_list_it_got_does_not_change_the_next_read(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    write_jsonl(path, [TestRecord(NODE, "passed"), TestRecord(NODE + "2", "skipped")])
    first = read_jsonl(path)
    first.clear()
    assert [r.outcome for r in read_jsonl(path)] == ["passed", "skipped"]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_lines_are_counted_as_a_text_file_reads_them(tmp_path: Path, newline: str) -> None:
    path = tmp_path / "results.jsonl"
    good = f'{{"nodeid": "{NODE}", "outcome": "passed"}}'
    path.write_bytes(newline.join([good, "", "{not json"]).encode())
    with pytest.raises(BadInputError, match=r"results\.jsonl:3:2: invalid JSON"):
        read_jsonl(path)
    path.write_bytes(newline.join([good, good]).encode())
    assert len(read_jsonl(path)) == 2
