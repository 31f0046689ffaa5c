"""exec's summary: every outcome and failure class with an example test and its reason."""

from __future__ import annotations

from rich.console import Console

from testcurator.cli.groups.exec import summary_table
from testcurator.runner.results.records import TestRecord


def test_every_row_has_an_example_with_its_reason() -> None:
    records = [
        TestRecord("t.py::TestA::test_ok_cpu", "passed", generic="TestA::test_ok"),
        TestRecord("t.py::TestA::test_s_cpu", "skipped", generic="TestA::test_s", failure_text="Skipped: dtype int8 is not in supported_dtypes"),
        TestRecord("t.py::TestA::test_x_cpu", "xfailed", generic="TestA::test_x",
                   failure_text="self = <T>\nE   NotImplementedError: aten::unfold"),
        TestRecord("t.py::TestA::test_f_cpu", "failed", generic="TestA::test_f", failure_class="unsupported_op",
                   evidence="Could not run 'aten::foo' with arguments from the 'curatedev' backend"),
    ]
    console = Console(record=True, width=200, color_system=None)
    console.print(summary_table(records, "4 tests"))
    rows = {line.split("│")[1].strip(): line.split("│")[3].strip() for line in console.export_text().splitlines()
            if line.startswith("│")}
    assert rows["skipped"] == "TestA::test_s: dtype int8 is not in supported_dtypes"
    assert rows["xfailed"] == "TestA::test_x: NotImplementedError: aten::unfold"
    assert rows["failed"] == "TestA::test_f: Could not run 'aten::foo' with arguments from the 'curatedev' backend"
    assert rows["unsupported_op"] == rows["failed"]
    assert rows["passed"] == "TestA::test_ok"


def test_a_narrow_terminal_wraps_the_example_at_name_segments_and_never_cuts_the_name() -> None:
    name = "TestCommonCPU::test_noncontiguous_samples_nn_functional_conv_transpose3d"
    evidence = "Could not run 'aten::slow_conv_transpose3d' with arguments from the 'curatedev' backend. " * 3
    records = [TestRecord(f"test/test_ops.py::{name}_cpu_complex64", "failed", generic=name, evidence=evidence)]
    console = Console(record=True, width=80, color_system=None)
    console.print(summary_table(records, "1 test"))
    cells = [line.split("│")[3].strip() for line in console.export_text().splitlines() if line.startswith("│")]
    assert len(cells) > 2 and all(len(c) <= 50 for c in cells)
    text = " ".join(cells)
    assert "TestCommonCPU::test_noncontiguous_samples_nn_ functional_conv_transpose3d:" in text  # broke after `_`
    # the reason, not the name, is shortened, at a word and with a mark
    assert text.endswith(" …")
    shown = text.split(": ", 1)[1].removesuffix(" …").replace(" ", "")
    assert evidence.replace(" ", "").startswith(shown) and 40 < len(shown) < len(evidence.replace(" ", ""))
