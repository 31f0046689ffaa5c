"""Exporting a config to PyTorch's disabled-tests JSON, and that format's matching rule."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from testcurator.cli.main import main
from testcurator.runner.collect import CollectedTest
from testcurator.pipelines.migrate.exporters import export_disabled_tests, format_key, key_matches, parse_key, sanitized_name
from testcurator.errors import BadInputError

UPSTREAM = textwrap.dedent(
    '''
    import torch
    from torch.testing._internal.common_utils import TestCase
    from torch.testing._internal.common_device_type import instantiate_device_type_tests, dtypes, ops
    from torch.testing._internal.common_methods_invocations import op_db

    OPS = [o for o in op_db if o.name in ("add", "mul") and not o.variant_test_name]

    class TestFoo(TestCase):
        @dtypes(torch.float32, torch.int64)
        def test_bar(self, device, dtype):
            pass

        @ops(OPS, allowed_dtypes=(torch.float32,))
        def test_op(self, device, dtype, op):
            pass

        def test_storage_error(self, device):
            pass

        def test_storage_error_no_attribute(self, device):
            pass

    instantiate_device_type_tests(TestFoo, globals(), only_for="cpu")
    '''
)

CONFIG = """test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test/test_foo.py
      unlisted_test_mode: mandatory_success
      tests:
        # Typed storage is not supported.
        - names: [TestFoo::test_storage_error]
          mode: skip
        # Integer path is missing.
        - names: [TestFoo::test_bar]
          mode: mandatory_success
          edits: {dtypes: {exclude: [{name: int64}]}}
        - names: [TestFoo::test_op]
          mode: xfail
"""


@pytest.mark.parametrize(
    ("name", "expected"),
    [("test_bar_cpu_float32", "test_bar"), ("test_bar_float32", "test_bar"), ("test_x_cpu", "test_x_cpu"),
     ("test_op_add_cpu_float32", "test_op_add"), ("test_plain", "test_plain")],
)
def test_sanitized_name(name: str, expected: str) -> None:
    assert sanitized_name(name) == expected


def _t(cls: str, name: str) -> CollectedTest:
    return CollectedTest("n", "f", cls, name, "", "cpu", None, None, None, (name,))


@pytest.mark.parametrize(
    ("key", "cls", "name", "hit"),
    [
        ("test_bar (__main__.TestFoo)", "TestFooCPU", "test_bar_cpu_float32", True),
        ("test_storage_error_cpu (__main__.TestFooCPU)", "TestFooCPU", "test_storage_error_no_attribute_cpu", False),
        ("test_x (__main__.TestFoo)", "TestFooCPU", "test_x_cpu", False),  # no dtype: only the full name hits
        ("test_bar (test_foo.TestFoo)", "TestFooBarCPU", "test_bar_cpu_float32", True),  # PyTorch's class prefix
    ],
)
def test_pytorch_matching_rule(key: str, cls: str, name: str, hit: bool) -> None:
    assert key_matches(parse_key(key), _t(cls, name)) is hit


def test_key_round_trip_and_bad_key() -> None:
    key = format_key("TestFooCPU", "test_bar_cpu_float32")
    assert key == "test_bar_cpu_float32 (__main__.TestFooCPU)"
    assert parse_key(key).cls == "TestFooCPU"
    with pytest.raises(BadInputError):
        parse_key("TestFoo::test_bar")


def test_export_generic_without_torch_root(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(CONFIG)
    out = tmp_path / "disabled.json"
    report = export_disabled_tests(tmp_path / "c.yaml", out)
    data = json.loads(out.read_text())
    assert data == {
        "test_op (__main__.TestFoo)": ["testcurator xfail", []],
        "test_storage_error (__main__.TestFoo)": ["testcurator skip: Typed storage is not supported.", []],
    }
    assert any("TestFoo::test_bar: edits need instantiated names" in n for n in report.not_exported)
    export_disabled_tests(tmp_path / "c.yaml", out, include_xfail=False)
    assert list(json.loads(out.read_text())) == ["test_storage_error (__main__.TestFoo)"]


@pytest.mark.slow
def test_cli_export_instantiated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "torch"
    (root / "test").mkdir(parents=True)
    (root / "test" / "test_foo.py").write_text(UPSTREAM)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "test_foo.yaml").write_text(CONFIG)
    outs = []
    for i in range(2):
        out = tmp_path / f"d{i}.json"
        args = ["export", "disabled-tests", "--config", str(tmp_path / "configs"), "--out", str(out),
                "--torch-root", str(root), "--platform", "linux"]
        assert main(args) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]  # byte-identical on rerun
    data = json.loads(outs[0])
    assert data == {
        "test_bar_cpu_int64 (__main__.TestFooCPU)": ["testcurator skip: dtype int64 excluded by edits", ["linux"]],
        "test_op_add_cpu_float32 (__main__.TestFooCPU)": ["testcurator xfail", ["linux"]],
        "test_op_mul_cpu_float32 (__main__.TestFooCPU)": ["testcurator xfail", ["linux"]],
        "test_storage_error_cpu (__main__.TestFooCPU)": ["testcurator skip: Typed storage is not supported.", ["linux"]],
    }
    assert "wrote 4 key(s)" in capsys.readouterr().out
