"""The curate plugin on real device-generic tests (pytester, real op_db on CPU)."""

from __future__ import annotations

import re

import pytest

BASE = """
test_suite_config:
  files:
    - path: ${{TORCH_ROOT}}/test_foo.py
      unlisted_test_mode: {unlisted}
      tests:
{tests}
"""


def write_config(pytester: pytest.Pytester, body: str, name: str = "curate.yaml") -> str:
    path = pytester.path / name
    path.write_text(body)
    return str(path)


def run(pytester: pytest.Pytester, tests: str, *args: str, unlisted: str = "skip", extra: str = "") -> pytest.RunResult:
    body = BASE.format(unlisted=unlisted, tests=tests) + extra
    cfg = write_config(pytester, body)
    return pytester.runpytest("-p", "no:cacheprovider", "--curate-config", cfg, "--curate-torch-root", str(pytester.path), "-rA", *args)


def outcomes(result: pytest.RunResult) -> dict[str, str]:
    """node id -> outcome word from -rA lines (PASSED/SKIPPED/XFAIL/XPASS/FAILED)."""
    out = {}
    for line in result.outlines:
        m = re.match(r"^(PASSED|FAILED|XFAIL|XPASS|ERROR) (\S+)", line)
        if m:
            out[m.group(2).split("::", 1)[1]] = m.group(1)
    return out


def test_plugin_inactive_without_option(generic_file: pytest.Pytester) -> None:
    result = generic_file.runpytest("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=17, failed=1)
    assert "testcurator" not in result.stdout.str()


def test_modes_apply_with_reasons(generic_file: pytest.Pytester) -> None:
    tests = """
        # Plain arithmetic; green on the backend.
        - names: [TestFoo::test_bar, TestPlain::test_q]
          mode: mandatory_success
        # Compares different numbers on purpose.
        - names: [TestFoo::test_fails]
          mode: xfail
        - names: [TestPlain::test_passes]
          mode: xfail_strict
        - names: [test_function]
          mode: skip
    """
    result = run(generic_file, tests)
    got = outcomes(result)
    assert got["TestFooCPU::test_bar_cpu_float32"] == "PASSED"
    assert got["TestPlain::test_q_k_3"] == "PASSED"
    assert got["TestFooCPU::test_fails_cpu"] == "XFAIL"
    assert got["TestPlain::test_passes"] == "FAILED"  # strict xfail that passed
    result.stdout.fnmatch_lines(["*XPASS(strict)*", "*Compares different numbers on purpose*"])
    # unlisted_test_mode: skip covers test_op, test_param, storage tests; test_function is listed skip.
    result.assert_outcomes(passed=5, failed=1, xfailed=1, skipped=11)


@pytest.mark.parametrize(
    ("listed", "expected_run"),
    [
        ("TestFoo::test_storage_error", {"TestFooCPU::test_storage_error_cpu"}),
        ("TestFoo::test_storage_error_no_attribute", {"TestFooCPU::test_storage_error_no_attribute_cpu"}),
    ],
)
def test_exact_match_never_substring(generic_file: pytest.Pytester, listed: str, expected_run: set[str]) -> None:
    result = run(generic_file, f"        - names: [{listed}]\n          mode: mandatory_success\n")
    passed = {k for k, v in outcomes(result).items() if v == "PASSED"}
    assert passed == expected_run


def test_edits_cost_one_instance_each(generic_file: pytest.Pytester) -> None:
    tests = """
        - names: [TestFoo::test_bar]
          mode: mandatory_success
          edits:
            dtypes:
              exclude: [{name: int64}]
              include: [{name: bfloat16}]
        - names: [TestFoo::test_op]
          mode: mandatory_success
          edits:
            ops:
              exclude: [{name: sub}, {name: nn.functional.relu, dtypes: [{name: float64}]}]
    """
    result = run(generic_file, tests)
    passed = {k for k, v in outcomes(result).items() if v == "PASSED"}
    assert passed == {
        "TestFooCPU::test_bar_cpu_float32",
        "TestFooCPU::test_bar_cpu_float64",
        "TestFooCPU::test_bar_cpu_bfloat16",  # added coverage, upstream file untouched
        "TestFooCPU::test_op_add_cpu_float32",
        "TestFooCPU::test_op_add_cpu_float64",
        "TestFooCPU::test_op_nn_functional_relu_cpu_float32",
    }
    text = result.stdout.str()
    assert "dtype int64 excluded by edits" in text
    assert "op sub excluded by edits" in text
    assert "bfloat16" not in (generic_file.path / "test_foo.py").read_text()


def test_capabilities_skip_with_named_reason(generic_file: pytest.Pytester) -> None:
    tests = """
        - names: [TestFoo::test_bar, TestFoo::test_op]
          mode: mandatory_success
    """
    extra = """  global:
    supported_dtypes: [{name: float32}, {name: float64}]
    supported_ops: [{name: add}, {name: sub, dtypes: [{name: float32}]}]
"""
    result = run(generic_file, tests, extra=extra)
    passed = {k for k, v in outcomes(result).items() if v == "PASSED"}
    assert passed == {
        "TestFooCPU::test_bar_cpu_float32",
        "TestFooCPU::test_bar_cpu_float64",
        "TestFooCPU::test_op_add_cpu_float32",
        "TestFooCPU::test_op_add_cpu_float64",
        "TestFooCPU::test_op_sub_cpu_float32",
    }
    result.stdout.fnmatch_lines_random([
        "*dtype int64 is not in supported_dtypes*",
        "*op nn.functional.relu is not in supported_ops*",
        "*op sub is not supported for dtype float64*",
    ])


def test_marks_select_with_strict_markers(generic_file: pytest.Pytester) -> None:
    tests = "        - names: [TestFoo::test_op]\n          mode: mandatory_success\n"
    result = run(generic_file, tests, "--strict-markers", "-m", "op__add and dtype__float32")
    result.assert_outcomes(passed=1, deselected=17)
    assert outcomes(result) == {"TestFooCPU::test_op_add_cpu_float32": "PASSED"}


def test_summary_counts_and_stale_entries(generic_file: pytest.Pytester) -> None:
    tests = """
        - names: [TestFoo::test_bar, TestFoo::test_was_removed_upstream]
          mode: mandatory_success
    """
    result = run(generic_file, tests)
    result.stdout.fnmatch_lines([
        "*testcurator*",
        "18 tests curated: mandatory_success 3, skip 15",
        "*1 stale config entries*",
        "*test_foo.py: TestFoo::test_was_removed_upstream",
    ])


def test_unlisted_file_mode(generic_file: pytest.Pytester) -> None:
    cfg = write_config(generic_file, "test_suite_config:\n  unlisted_file_mode: mandatory_success\n  files: []\n")
    result = generic_file.runpytest("-p", "no:cacheprovider", "--curate-config", cfg)
    result.assert_outcomes(passed=17, failed=1)
    cfg = write_config(generic_file, "test_suite_config:\n  files: []\n", name="default.yaml")
    result = generic_file.runpytest("-p", "no:cacheprovider", "--curate-config", cfg)
    result.assert_outcomes(skipped=18)


def test_junit_properties_carry_identity(generic_file: pytest.Pytester) -> None:
    tests = "        - names: [TestFoo::test_op]\n          mode: mandatory_success\n"
    xml = generic_file.path / "out.xml"
    run(generic_file, tests, f"--junitxml={xml}", "-m", "op__nn_functional_relu and dtype__float64")
    text = xml.read_text()
    for expected in ('name="curate_generic" value="TestFoo::test_op"', 'name="curate_op" value="nn.functional.relu"',
                     'name="curate_dtype" value="float64"', 'name="curate_device" value="cpu"',
                     'name="curate_mode" value="mandatory_success"'):
        assert expected in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--curate-config", "does-not-exist.yaml"], "config path does not exist"),
        (["--curate-torch-root", "no-such-dir", "--curate-config", "."], "not a directory"),
    ],
)
def test_bad_option_values_fail_at_parse_time(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


def test_invalid_config_is_a_usage_error_with_location(generic_file: pytest.Pytester) -> None:
    cfg = write_config(generic_file, "test_suite_config:\n  files:\n    - path: x.py\n      tests:\n        - names: [A::b]\n          mode: skipp\n")
    result = generic_file.runpytest("--curate-config", cfg)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*curate.yaml:6:17: *unknown mode 'skipp'*"])


def test_ini_key_enables_plugin(generic_file: pytest.Pytester) -> None:
    write_config(generic_file, "test_suite_config:\n  unlisted_file_mode: skip\n  files: []\n")
    generic_file.makeini("[pytest]\ncurate_config = curate.yaml\n")
    result = generic_file.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(skipped=18)


@pytest.mark.slow
def test_xdist_gives_same_outcomes(generic_file: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    tests = """
        - names: [TestFoo::test_bar]
          mode: mandatory_success
          edits:
            dtypes:
              include: [{name: bfloat16}]
        - names: [TestFoo::test_fails]
          mode: xfail_strict
    """
    cfg = write_config(generic_file, BASE.format(unlisted="mandatory_success", tests=tests))
    common = ["-p", "no:cacheprovider", "--curate-config", cfg, "--curate-torch-root", str(generic_file.path)]
    serial = generic_file.runpytest_subprocess(*common)
    parallel = generic_file.runpytest_subprocess(*common, "-n", "2")
    assert serial.parseoutcomes() == parallel.parseoutcomes()
    assert serial.parseoutcomes()["passed"] == 18
    parallel.stdout.fnmatch_lines(["*19 tests curated: mandatory_success 18, xfail_strict 1*"])


PAIRS = '''
import operator
from itertools import product

import pytest
import torch
from torch.testing._internal.common_utils import TestCase, parametrize
from torch.testing._internal.common_device_type import instantiate_device_type_tests, dtypes


class TestFoo(TestCase):
    @dtypes(*product((torch.complex64, torch.float32), (torch.float32, torch.int64)))
    def test_pair(self, device, dtypes):
        pass

    @parametrize("op", [operator.add, operator.sub], name_fn=lambda f: f.__name__)
    def test_plain_op(self, device, op):
        pass

instantiate_device_type_tests(TestFoo, globals(), only_for="cpu")


@pytest.mark.parametrize("k", [1, 2])
def test_module_level(k):
    pass
'''


def test_dtype_pairs_meet_capabilities_edits_and_marks(pytester: pytest.Pytester) -> None:
    """Each member of a dtype pair is a dtype the config's rules see (issue 9: complex64
    instances of a pair test ran though complex64 was not declared)."""
    pytester.makepyfile(test_foo=PAIRS)
    tests = """
        - names: [TestFoo::test_pair, TestFoo::test_plain_op]
          mode: mandatory_success
          edits:
            dtypes:
              exclude: [{name: int64}]
        - names: [test_module_level]
          mode: xfail
    """
    extra = "  global:\n    supported_dtypes: [{name: float32}, {name: int64}]\n    supported_ops: [{name: add}]\n"
    result = run(pytester, tests, "--strict-markers", unlisted="skip", extra=extra)
    assert outcomes(result) == {
        "TestFooCPU::test_pair_cpu_float32_float32": "PASSED",
        "TestFooCPU::test_plain_op_add_cpu": "PASSED",
        "TestFooCPU::test_plain_op_sub_cpu": "PASSED",  # a plain "op" parameter is not an OpInfo
        "test_module_level[1]": "XPASS",  # a module-level function, both parameters
        "test_module_level[2]": "XPASS",
    }
    text = result.stdout.str()
    assert "dtype complex64 is not in supported_dtypes" in text
    assert "dtype int64 excluded by edits" in text
    marked = run(pytester, tests, "--strict-markers", "-m", "dtype__complex64", "--collect-only", "-q", extra=extra)
    assert sorted(line for line in marked.outlines if "::" in line) == [
        "test_foo.py::TestFooCPU::test_pair_cpu_complex64_float32",
        "test_foo.py::TestFooCPU::test_pair_cpu_complex64_int64",
    ]


# Beside the config's plugin: what decide() gives each collected item, computed afresh, and the
# mode mark the plugin put on it.
DECIDE_AFRESH = '''
import json
import os

import pytest

from testcurator.config.apply import decide
from testcurator.plugin.identity import item_identity


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    curate = config.pluginmanager.get_plugin("testcurator-curate")
    with open(os.environ["DECISIONS_OUT"], "w") as out:
        for item in items:
            fresh = decide(curate.loaded, curate.file_for(item.path), item_identity(item))
            marks = [m for m in item.iter_markers() if m.name in ("skip", "xfail")]
            got = [(m.name, m.kwargs.get("reason"), m.kwargs.get("strict")) for m in marks]
            want = {"skip": [("skip", fresh.reason, None)], "xfail": [("xfail", fresh.reason, False)],
                    "xfail_strict": [("xfail", fresh.reason, True)]}.get(fresh.mode, [])
            out.write(json.dumps({"nodeid": item.nodeid, "origin": fresh.origin, "same": got == want}) + "\\n")
'''


def test_each_item_gets_what_decide_gives_it_afresh(generic_file: pytest.Pytester,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin decides once per what a decision reads (config/apply.decision_key): with
    edits on dtypes, ops and parameters, capabilities and unlisted tests in one config, every
    item still carries the mode and reason decide() gives it alone."""
    import json

    generic_file.makeconftest(DECIDE_AFRESH)
    out = generic_file.path / "decisions.jsonl"
    monkeypatch.setenv("DECISIONS_OUT", str(out))
    tests = """
        - names: [TestFoo::test_bar]
          mode: xfail
          edits:
            dtypes:
              exclude: [{name: int64}]
        - names: [TestFoo::test_op]
          mode: mandatory_success
          edits:
            ops:
              exclude: [{name: nn.functional.relu, dtypes: [{name: float64}]}]
        - names: [TestFoo::test_param]
          mode: xfail_strict
          edits:
            params:
              exclude: [{name: n, values: [2]}]
    """
    extra = "  global:\n    supported_dtypes: [{name: float32}, {name: float64}]\n    supported_ops: [{name: add}, {name: nn.functional.relu}]\n"
    run(generic_file, tests, "--collect-only", unlisted="xfail", extra=extra)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 18 and all(row["same"] for row in rows), [r for r in rows if not r["same"]]
    assert {row["origin"] for row in rows} == {"entry", "edit", "capability", "unlisted_test"}
