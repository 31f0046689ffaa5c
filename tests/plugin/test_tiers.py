"""--curate-tier on real device-generic tests: L1 keeps the tiers file's instances, L3 probes."""

from __future__ import annotations

import json
import re

import pytest

from testcurator.tiers import tier_key

CONFIG = """
test_suite_config:
  global:
    supported_dtypes: [{name: float32}, {name: int64}]
  files:
    - path: ${TORCH_ROOT}/test_foo.py
      unlisted_test_mode: mandatory_success
      tests:
        - names: [TestFoo::test_fails]
          mode: xfail
        - names: [TestFoo::test_op]
          mode: mandatory_success
          edits:
            ops:
              exclude: [{name: sub}]
"""


def _outcomes(result: pytest.RunResult) -> dict[str, str]:
    found = (re.match(r"^(\S+::\S+) (PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR)", line) for line in result.outlines)
    return {m.group(1).split("::", 1)[1]: m.group(2) for m in found if m}


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    config = pytester.path / "curate.yaml"
    config.write_text(CONFIG)
    return pytester.runpytest("-p", "no:cacheprovider", f"--curate-config={config}",
                              f"--curate-torch-root={pytester.path}", "-v", *args)


def test_l1_keeps_only_the_chosen_instances(generic_file: pytest.Pytester) -> None:
    keys = [tier_key("test_foo.py", "TestFoo::test_bar", None, "int64", None),
            tier_key("test_foo.py", "TestFoo::test_op", "add", "float32", None),
            tier_key("test_foo.py", "TestPlain::test_passes", None, None, None)]
    tiers = generic_file.path / "tiers.json"
    tiers.write_text(json.dumps({"L1": {"keys": keys}}))
    result = _run(generic_file, "--curate-tier=L1", f"--curate-tier-file={tiers}")
    assert set(_outcomes(result)) == {"TestFooCPU::test_bar_cpu_int64", "TestFooCPU::test_op_add_cpu_float32",
                                      "TestPlain::test_passes"}
    assert "tier L1 keeps 3 tests" in result.stdout.str()


def test_l3_probes_what_the_config_holds_back(generic_file: pytest.Pytester) -> None:
    l2 = _outcomes(_run(generic_file))
    l3 = _outcomes(_run(generic_file, "--curate-tier=L3"))
    # float64 is not a supported dtype (a capability skip), sub is excluded by an edit:
    # under L3 they run, pass, and the strict probe reports it (a failure that says "promote").
    assert l2["TestFooCPU::test_bar_cpu_float64"] == "SKIPPED" and l3["TestFooCPU::test_bar_cpu_float64"] == "FAILED"
    assert l2["TestFooCPU::test_op_sub_cpu_float32"] == "SKIPPED" and l3["TestFooCPU::test_op_sub_cpu_float32"] == "FAILED"
    # The xfail entry that does fail stays an expected failure, now strict.
    assert l2["TestFooCPU::test_fails_cpu"] == l3["TestFooCPU::test_fails_cpu"] == "XFAIL"
    # What the config decided to run, or to skip by its own entry, is untouched.
    assert l3["TestFooCPU::test_bar_cpu_float32"] == "PASSED"


@pytest.mark.parametrize(("args", "message"), [
    (["--curate-tier=L4"], "expected one of L1, L2, L3"),
    (["--curate-tier=L1"], "needs --curate-tier-file"),
    (["--curate-tier=L1", "--curate-tier-file=missing.json"], "tiers file"),
])
def test_tier_usage_errors(generic_file: pytest.Pytester, args: list[str], message: str) -> None:
    result = _run(generic_file, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()
