"""Ingesting JUnit XML and JSONL: pytest's real output, unittest-style reports, our own."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import traceback
from pathlib import Path

import pytest
import torch

from testcurator.errors import BadInputError
from testcurator.runner.results.ingest import load_results
from testcurator.runner.results.junit_write import write_junit
from testcurator.runner.results.records import TestRecord, write_jsonl

UPSTREAM_STYLE = '''
import torch
from torch.testing._internal.common_utils import TestCase
from torch.testing._internal.common_device_type import instantiate_device_type_tests, ops, dtypes
from torch.testing._internal.common_methods_invocations import op_db

_neg = [o for o in op_db if o.name == "neg"]

class TestIngest(TestCase):
    @ops(_neg, allowed_dtypes=(torch.float32,))
    def test_wrapped(self, device, dtype, op):
        for sample in op.sample_inputs(device, dtype):
            out = op(sample.input)
            self.assertEqual(out, out + 1)

    @dtypes(torch.float16)
    def test_half(self, device, dtype):
        torch.linalg.cholesky(torch.eye(3, dtype=dtype, device=device))

    def test_fine(self, device):
        self.assertEqual(torch.ones(2, device=device).sum().item(), 2.0)

instantiate_device_type_tests(TestIngest, globals(), only_for="cpu")
'''


@pytest.fixture(scope="module")
def pytest_xml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """JUnit XML from a real pytest run of upstream-style device-generic tests."""
    root = tmp_path_factory.mktemp("upstream")
    (root / "test_ingest.py").write_text(textwrap.dedent(UPSTREAM_STYLE), encoding="utf-8")
    xml = root / "report.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:langsmith_plugin",
                    "-p", "no:hypothesispytest", "test_ingest.py", f"--junitxml={xml}"], cwd=root, capture_output=True, timeout=300)
    return xml


@pytest.mark.slow
def test_pytest_xml_from_upstream_style_tests(pytest_xml: Path) -> None:
    got = {r.nodeid: r for r in load_results([pytest_xml], known_tests={"TestIngest::test_wrapped"})}
    wrapped = got["test_ingest.py::TestIngestCPU::test_wrapped_neg_cpu_float32"]
    assert (wrapped.generic, wrapped.op, wrapped.dtype, wrapped.device) == ("TestIngest::test_wrapped", "neg", "float32", "cpu")
    assert wrapped.failure_class == "numerical_mismatch" and "Mismatched elements: " in wrapped.evidence
    assert "PYTORCH_PRINT_REPRO_ON_FAILURE" in wrapped.failure_text  # through torch's repro wrapper
    half = got["test_ingest.py::TestIngestCPU::test_half_cpu_float16"]
    assert (half.failure_class, half.dtype) == ("unsupported_dtype", "float16")
    assert got["test_ingest.py::TestIngestCPU::test_fine_cpu"].outcome == "passed"


def _unittest_report(tmp_path: Path) -> Path:
    # unittest-xml-reporting's shape (run_test.py's python-unittest reports), real traceback.
    try:
        torch.ones(2, dtype=torch.bool).neg()
    except RuntimeError:
        tb = traceback.format_exc()
    from xml.sax.saxutils import escape, quoteattr

    xml = f"""<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="TestFooCURATEDEV-20250101" tests="2" failures="1" errors="0" skipped="0" time="0.2">
  <testcase classname="__main__.TestFooCURATEDEV" name="test_neg_curatedev_bool" time="0.1" file="test_foo.py">
    <failure type="RuntimeError" message={quoteattr(tb.strip().splitlines()[-1])}>{escape(tb)}</failure>
  </testcase>
  <testcase classname="__main__.TestFooCURATEDEV" name="test_neg_curatedev_float32" time="0.1" file="test_foo.py"/>
</testsuite>"""
    path = tmp_path / "TEST-TestFooCURATEDEV.xml"
    path.write_text(xml, encoding="utf-8")
    return path


def test_unittest_style_report_with_backend_device(tmp_path: Path) -> None:
    got = {r.nodeid: r for r in load_results([_unittest_report(tmp_path)], devices=("curatedev",))}
    bad = got["test_foo.py::TestFooCURATEDEV::test_neg_curatedev_bool"]
    assert (bad.generic, bad.device, bad.dtype, bad.outcome) == ("TestFoo::test_neg", "curatedev", "bool", "failed")
    assert bad.failure_class == "unsupported_dtype"
    assert got["test_foo.py::TestFooCURATEDEV::test_neg_curatedev_float32"].outcome == "passed"


def test_rerun_elements_mark_flaky(tmp_path: Path) -> None:
    path = tmp_path / "reruns.xml"
    path.write_text('<testsuites><testsuite><testcase classname="test_x.TestA" name="test_b" time="1">'
                    '<rerun message="ConnectionResetError: [Errno 104] Connection reset by peer">'
                    'E   ConnectionResetError: [Errno 104] Connection reset by peer</rerun>'
                    '</testcase></testsuite></testsuites>', encoding="utf-8")
    (record,) = load_results([path])
    assert (record.outcome, record.flaky, record.attempts, record.failure_class) == ("passed", True, 2, "transient")
    assert "Connection reset by peer" in record.evidence


def test_our_junit_and_jsonl_round_trip(tmp_path: Path) -> None:
    records = [
        TestRecord("t.py::TestA::test_x_cpu", "crashed", generic="TestA::test_x", device="cpu", failure_class="crash",
                   evidence="Fatal Python error: Segmentation fault", failure_text="Fatal Python error: \x1b[31mSegmentation fault"),
        TestRecord("t.py::TestA::test_y_cpu", "passed", generic="TestA::test_y", device="cpu", attempts=2, flaky=True,
                   failure_class="transient", evidence="passed on attempt 2"),
    ]
    write_junit(tmp_path / "junit.xml", records)
    write_jsonl(tmp_path / "results.jsonl", records)
    for path in (tmp_path / "junit.xml", tmp_path / "results.jsonl"):
        back = load_results([path])
        fields = [(r.nodeid, r.outcome, r.generic, r.failure_class, r.evidence, r.flaky, r.attempts) for r in back]
        assert fields == [(r.nodeid, r.outcome, r.generic, r.failure_class, r.evidence, r.flaky, r.attempts) for r in records]


def test_same_test_in_two_files_merges_as_attempts(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "a.jsonl", [TestRecord("t.py::A::test_q", "failed", failure_class="unknown", evidence="boom")])
    write_jsonl(tmp_path / "b.jsonl", [TestRecord("t.py::A::test_q", "passed")])
    (merged,) = load_results([tmp_path])  # a directory is searched
    assert (merged.outcome, merged.flaky, merged.attempts) == ("passed", True, 2)


@pytest.mark.parametrize(("content", "name", "where"), [
    ('<testsuite>\n<testcase name="a">\n</testsuite>', "bad.xml", ":3:"),
    ('{"nodeid": "a::b", "outcome": "passed"}\n{not json\n', "bad.jsonl", ":2:"),
    ('{"nodeid": "a::b", "outcome": "exploded"}\n', "odd.jsonl", ":1:"),
])
def test_bad_input_names_file_and_line(tmp_path: Path, content: str, name: str, where: str) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(BadInputError) as info:
        load_results([path])
    assert f"{path}{where}" in str(info.value)


@pytest.mark.parametrize("outcome", ["passed", "failed", "error", "crashed", "timeout", "skipped", "xfailed", "xpassed"])
def test_the_junit_text_is_xml_that_keeps_every_character_a_record_may_hold(tmp_path: Path, outcome: str) -> None:
    """Quotes, ampersands, angle brackets, CR, LF and tabs come back as they were; the control
    characters XML 1.0 forbids (ANSI colours) come back as '?'."""
    import xml.etree.ElementTree as ET

    odd = 'say "a" & <b> \'c\'\r\n\tend \x1b[31m'
    record = TestRecord("a/t.py::TestA::test_x[p<1>]", outcome, generic="TestA::test_x", evidence=odd,
                        failure_class="assertion", failure_text=odd + " ]]> tail", params=(("p", "'<1>'"),), duration=1.5)
    write_junit(tmp_path / "junit.xml", [record])
    (case,) = ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")
    assert (case.get("classname"), case.get("name"), case.get("time")) == ("a.t.TestA", "test_x[p<1>]", "1.500")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    cleaned = odd.replace("\x1b", "?")
    assert props["curate_evidence"] == cleaned and props["curate_outcome"] == outcome
    assert props["curate_params"] == '{"p": "\'<1>\'"}'
    (back,) = load_results([tmp_path / "junit.xml"])
    assert (back.outcome, back.evidence, back.params) == (outcome, cleaned, (("p", "'<1>'"),))
    outcome_elements = [child for child in case if child.tag != "properties"]
    if outcome in ("passed", "xpassed"):
        assert outcome_elements == []
    else:
        (element,) = outcome_elements
        assert element.tag == {"error": "error", "skipped": "skipped", "xfailed": "skipped"}.get(outcome, "failure")
        if element.tag != "skipped":
            assert element.text == cleaned.replace("\r\n", "\n") + " ]]> tail"  # an XML parser reads CR LF as LF
