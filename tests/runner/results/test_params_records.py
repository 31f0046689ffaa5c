"""@parametrize values travel with each record (issue 13 item 2: refine separates by them):
the curate plugin's JUnit properties, the runner's JUnit and JSONL, and older records."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testcurator.errors import BadInputError
from testcurator.runner.results.ingest import load_results
from testcurator.runner.results.junit_write import write_junit
from testcurator.runner.results.records import TestRecord, read_jsonl, write_jsonl

UPSTREAM = textwrap.dedent('''
    import torch
    from torch.testing._internal.common_device_type import instantiate_device_type_tests
    from torch.testing._internal.common_utils import TestCase, parametrize


    def _shape_name(shape):
        return "x".join(str(s) for s in shape)


    class TestRed(TestCase):
        @parametrize("shape", [(2, 3), (0,)], name_fn=_shape_name)
        @parametrize("reduction", ["sum", "mean"])
        def test_reduce(self, device, shape, reduction):
            getattr(torch.ones(shape, device=device), reduction)()


    instantiate_device_type_tests(TestRed, globals(), only_for="cpu")
''')
CONFIG = """\
test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test_red.py
      tests:
        - names: [TestRed::test_reduce]
          mode: mandatory_success
"""
PARAMS = (("reduction", "'mean'"), ("shape", "(0,)"))


@pytest.mark.slow
def test_plugin_junit_carries_params(tmp_path: Path) -> None:
    (tmp_path / "test_red.py").write_text(UPSTREAM)
    (tmp_path / "curate.yaml").write_text(CONFIG)
    xml = tmp_path / "r.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_red.py",
                           "--curate-config", "curate.yaml", "--curate-torch-root", str(tmp_path), f"--junitxml={xml}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:]
    got = {r.nodeid.rsplit("::", 1)[1]: r.params for r in load_results([xml])}
    # name_fn names the shape "0" in the test name; the record keeps the live value.
    assert got["test_reduce_0_reduction_mean_cpu"] == PARAMS, sorted(got)
    assert len(got) == 4 and len(set(got.values())) == 4


def test_runner_files_round_trip_params(tmp_path: Path) -> None:
    records = [TestRecord("t.py::TestA::test_x_cpu", "failed", generic="TestA::test_x", params=PARAMS),
               TestRecord("t.py::TestA::test_y_cpu", "passed", generic="TestA::test_y")]
    write_junit(tmp_path / "junit.xml", records)
    write_jsonl(tmp_path / "results.jsonl", records)
    for path in (tmp_path / "junit.xml", tmp_path / "results.jsonl"):
        assert [r.params for r in load_results([path])] == [PARAMS, ()], path


def test_records_written_before_params_still_read(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps({"nodeid": "t.py::A::test_q", "outcome": "passed", "generic": "A::test_q",
                                "dtype": "float32"}) + "\n")
    (record,) = read_jsonl(path)
    assert record.params == () and record.dtype == "float32"


def test_bad_params_property_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "bad.xml"
    path.write_text('<testsuites><testsuite><testcase classname="t.TestA" name="test_x_cpu"><properties>'
                    '<property name="curate_generic" value="TestA::test_x"/>'
                    '<property name="curate_params" value="{not json"/></properties></testcase></testsuite></testsuites>')
    with pytest.raises(BadInputError, match="curate_params"):
        load_results([path])
