"""config.wrap: names wrap at their segments (`::`, `/`, `_`), never mid-word, never cut."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.table import Table

from testcurator.config.wrap import Wrapped, pieces, wrap_text

NODE = "test/test_ops.py::TestCommonCPU::test_noncontiguous_samples_nn_functional_conv_transpose3d_cpu_complex64"


def test_pieces_join_back_and_break_only_at_separators() -> None:
    assert "".join(pieces(NODE)) == NODE
    assert pieces("x::y_z/w") == ["x::", "y_", "z/", "w"]
    assert pieces("test_x[float32-cpu]") == ["test_", "x", "[float32-", "cpu]"]
    # `->` stays whole, and a sign stays on its word
    assert pieces("skip -> xfail") == ["skip -> ", "xfail"]
    assert pieces("-exclude dtype int8 --top") == ["-exclude ", "dtype ", "int8 ", "--top"]


@pytest.mark.parametrize("width", [20, 33, 40, 60])
def test_wrap_prefers_spaces_and_colons_then_underscores(width: int) -> None:
    lines = wrap_text(NODE, width).splitlines()
    assert len(lines) > 1 and "".join(lines) == NODE
    assert all(len(line) <= width for line in lines)
    assert all(line.endswith(("::", "_", "/")) for line in lines[:-1]), lines
    if width in (20, 33):  # the class name fits on the first line only from 33 columns on
        assert lines[:2] == (["test/test_ops.py::", "TestCommonCPU::test_"] if width == 20
                             else ["test/test_ops.py::TestCommonCPU::", "test_noncontiguous_samples_nn_"])


def test_prose_wraps_at_spaces_before_underscores() -> None:
    text = "unlisted (mandatory_success) -> mandatory_success"
    assert wrap_text(text, 32).splitlines() == ["unlisted (mandatory_success) ->", "mandatory_success"]
    assert wrap_text(text, 30).splitlines() == ["unlisted", "(mandatory_success) ->", "mandatory_success"]
    assert wrap_text(text, 12).splitlines() == ["unlisted", "(mandatory_", "success) ->", "mandatory_", "success"]


def test_a_piece_wider_than_the_column_is_folded_not_dropped() -> None:
    assert wrap_text("abcdefghijk", 4).splitlines() == ["abcd", "efgh", "ijk"]
    assert wrap_text("", 10) == "" and wrap_text("a\nb", 10) == "a\nb"


def test_in_a_table_other_columns_give_way_first() -> None:
    table = Table()
    table.add_column("seconds", no_wrap=True)
    table.add_column("node id")
    table.add_row("1.000", Wrapped(NODE))
    console = Console(record=True, width=60, color_system=None, file=io.StringIO())
    console.print(table)
    rows = [line.split("│")[2].strip() for line in console.export_text().splitlines() if line.startswith("│")]
    assert "".join(rows) == NODE
    assert all(r.endswith(("::", "_")) for r in rows[:-1]), rows
