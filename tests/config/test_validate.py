"""`testcurator validate`: one `file:line:col: message` per problem, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testcurator.cli.main import main

GOOD = """\
test_suite_config:
  schema_version: 1
  labels: [trunk]
  global:
    supported_dtypes: [{name: float32}]
    supported_ops:
      - name: add
        dtypes: [{name: float32}]
  files:
    - path: ${TORCH_ROOT}/test/test_a.py
      unlisted_test_mode: skip
      tests:
        # why
        - names: [TestA::test_one, TestA::test_two]
          mode: mandatory_success
          edits:
            dtypes:
              exclude: [{name: bool}]
              include: [{name: bfloat16}]
            ops:
              exclude: [{name: sub}]
            modules:
              exclude: [{name: nn.Linear}]
"""

# (replace this, with that) in GOOD -> expected "line:col: fragment"
BROKEN = [
    ("mode: mandatory_success", "mode: mandatory", "15:17", "unknown mode 'mandatory'"),
    ("          mode: mandatory_success", "          mode: mandatory_success\n          mdoe: skip", "16:11", "unknown key 'mdoe'"),
    ("{name: bool}", "{name: boolean}", "18:32", "unknown dtype 'boolean'"),
    ("TestA::test_two", "test_a.py::TestA::test_two", "14:36", "not in Class::test form"),
    ("TestA::test_two", "TestACPU::test_one_cpu_float32", "14:36", "instantiated name"),
    ("TestA::test_two", "TestA::test_one", "14:36", "listed twice in this file (first at line 14)"),
    ("test/test_a.py", "test/test_missing.py", "10:13", "upstream test file does not exist"),
    ("${TORCH_ROOT}", "${NOT_SET_ANYWHERE}", "10:13", "undefined variable ${NOT_SET_ANYWHERE}"),
    ("  labels: [trunk]", "  labels: [trunk", "4:9", "YAML syntax error"),
    ("schema_version: 1", "schema_version: 2", "2:19", "schema_version"),
    ("      unlisted_test_mode: skip", "      unlisted_test_mode: sometimes", "11:27", "unknown mode 'sometimes'"),
    ("              include: [{name: bfloat16}]", "              include: [{name: bool}]", "18:15", "both excluded and included"),
]


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "test_a.py").write_text("def test_x():\n    pass\n")
    monkeypatch.setenv("TORCH_ROOT", str(tmp_path))
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    return tmp_path


def test_valid_config_exits_zero(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tree / "good.yaml"
    cfg.write_text(GOOD)
    assert main(["validate", str(cfg)]) == 0
    assert "1 config file(s) valid" in capsys.readouterr().out


@pytest.mark.parametrize(("old", "new", "where", "fragment"), BROKEN)
def test_each_problem_points_at_its_line(tree: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, where: str, fragment: str) -> None:
    assert old in GOOD
    cfg = tree / "bad.yaml"
    cfg.write_text(GOOD.replace(old, new, 1))
    assert main(["validate", str(cfg)]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith(str(cfg))]
    assert any(line.startswith(f"{cfg}:{where}: ") and fragment in line for line in lines), err


def test_every_problem_reported_once_per_line(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tree / "bad.yaml"
    cfg.write_text(GOOD.replace("mode: mandatory_success", "mode: nope").replace("{name: bool}", "{name: boo}"))
    assert main(["validate", str(cfg)]) == 2
    problems = [line for line in capsys.readouterr().err.splitlines() if line.startswith(str(cfg))]
    assert len(problems) == 2


def test_directory_of_configs_and_duplicate_file(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    configs = tree / "configs"
    configs.mkdir()
    (configs / "a.yaml").write_text(GOOD)
    (configs / "b.yaml").write_text(GOOD.replace("TestA::test_one, TestA::test_two", "TestA::test_three"))
    assert main(["validate", str(configs)]) == 2
    err = capsys.readouterr().err
    assert f"{configs / 'b.yaml'}:10:7: file '${{TORCH_ROOT}}/test/test_a.py' is already listed at {configs / 'a.yaml'}:10:7" in err


@pytest.mark.parametrize("content", ["", "just a string\n", "test_suite_config: 3\n", "other: {}\n"])
def test_not_a_config(tree: Path, capsys: pytest.CaptureFixture[str], content: str) -> None:
    cfg = tree / "odd.yaml"
    cfg.write_text(content)
    assert main(["validate", str(cfg)]) == 2
    assert str(cfg) in capsys.readouterr().err


def test_missing_path_and_empty_dir(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tree / "empty"
    empty.mkdir()
    assert main(["validate", str(tree / "nope.yaml"), str(empty)]) == 2
    err = capsys.readouterr().err
    assert "config path does not exist" in err and "no .yaml/.yml config files" in err


def test_torch_root_option_overrides_env(tree: Path, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path_factory.mktemp("other")
    cfg = tree / "good.yaml"
    cfg.write_text(GOOD)
    assert main(["validate", "--torch-root", str(other), str(cfg)]) == 2
    assert str(other / "test" / "test_a.py") in capsys.readouterr().err


def test_schema_is_json_schema_of_the_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["required"] == ["test_suite_config"]
    modes = schema["$defs"]["TestEntry"]["properties"]["mode"]["enum"]
    assert modes == ["mandatory_success", "xfail", "xfail_strict", "skip"]
    assert "global" in schema["$defs"]["SuiteConfig"]["properties"]


# --- instantiated names: the generic name to write, from what is known ---------------------
UPSTREAM_OPS = '''\
import torch
from torch.testing._internal.common_utils import TestCase, parametrize
from torch.testing._internal.common_device_type import instantiate_device_type_tests, ops, dtypes
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_modules import module_db, modules


class _OutChecks:
    @ops(op_db)
    def test_out_argument(self, device, dtype, op):
        pass


class TestCommon(_OutChecks, TestCase):
    @ops(op_db)
    def test_out_argument_warning(self, device, dtype, op):
        pass

    @parametrize("x", [1, 2])
    @dtypes(torch.float32)
    def test_scale(self, device, dtype, x):
        pass


class TestModule(TestCase):
    @modules(module_db)
    def test_forward(self, device, dtype, module_info, training):
        pass


instantiate_device_type_tests(TestCommon, globals())
instantiate_device_type_tests(TestModule, globals())
'''

INSTANTIATED = """\
test_suite_config:
  files:
    - path: ${{TORCH_ROOT}}/test/{file}
      tests:
        - names: [{name}]
          mode: skip
"""


@pytest.mark.parametrize(("name", "generic"), [
    # add is the OpInfo, not part of the test's name (the inherited test is found too)
    ("TestCommonCPU::test_out_argument_add_cpu_float32", "TestCommon::test_out_argument"),
    # the longest test the file defines wins: test_out_argument_warning, not test_out_argument
    ("TestCommonCPU::test_out_argument_warning_nn_functional_relu_cpu_float32", "TestCommon::test_out_argument_warning"),
    ("TestCommonCPU::test_scale_x_2_cpu_float32", "TestCommon::test_scale"),
    ("TestModuleCPU::test_forward_nn_BatchNorm1d_train_mode_cpu_float64", "TestModule::test_forward"),
])
def test_instantiated_name_gets_generic_name_from_upstream_file(tree: Path, capsys: pytest.CaptureFixture[str],
                                                                name: str, generic: str) -> None:
    (tree / "test" / "test_ops_like.py").write_text(UPSTREAM_OPS)
    cfg = tree / "inst.yaml"
    cfg.write_text(INSTANTIATED.format(file="test_ops_like.py", name=name))
    assert main(["validate", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert f"{cfg}:5:19: name '{name}' is an instantiated name; write the device-generic '{generic}'\n" in err


def test_instantiated_name_without_upstream_file_uses_opinfo_names(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tree / "inst.yaml"
    cfg.write_text(INSTANTIATED.format(file="test_not_here.py", name="TestCommonCPU::test_out_argument_add_cpu_float32"))
    assert main(["validate", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "write the device-generic 'TestCommon::test_out_argument' ('add' is the OpInfo/ModuleInfo part" in err


# --- test paths --------------------------------------------------------------------------------
PATHS = """\
test_suite_config:
  files:
    - path: {path}
      tests: []
"""


@pytest.mark.parametrize(("path", "fragments"), [
    # enough ../ to reach / from any temporary folder (more stop at /)
    ("${TORCH_ROOT}/" + "../" * 30 + "etc/passwd", ["resolves outside the torch root", "not a Python test file: passwd"]),
    ("/etc/hostname", ["resolves outside the torch root", "not a Python test file: hostname"]),
    ("${TORCH_ROOT}/test/helpers.py", ["not a Python test file by name: helpers.py"]),
    ("${TORCH_ROOT}/test/notes.txt", ["not a Python test file: notes.txt"]),
])
def test_paths_outside_root_or_not_test_files_are_rejected(tree: Path, capsys: pytest.CaptureFixture[str], path: str,
                                                           fragments: list[str]) -> None:
    for name in ("helpers.py", "notes.txt"):
        (tree / "test" / name).write_text("")
    cfg = tree / "paths.yaml"
    cfg.write_text(PATHS.format(path=path))
    assert main(["validate", str(cfg)]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith(f"{cfg}:3:13: ")]
    assert len(lines) == len(fragments) and all(any(f in line for line in lines) for f in fragments), lines


def test_allow_outside_root(tree: Path, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "test_vendor.py").write_text("def test_x():\n    pass\n")
    cfg = tree / "paths.yaml"
    cfg.write_text(PATHS.format(path=elsewhere / "test_vendor.py"))
    assert main(["validate", str(cfg)]) == 2
    assert "resolves outside the torch root" in capsys.readouterr().err
    assert main(["validate", "--allow-outside-root", str(cfg)]) == 0


# --- files that say nothing ------------------------------------------------------------------
@pytest.mark.parametrize(("content", "where", "fragment"), [
    ("", "1:1", "the file is empty; expected a mapping with the key test_suite_config"),
    ("\n\n   \n", "1:1", "the file is empty"),
    ("\n# configs for the backend\n# (none yet)\n", "2:1", "the file holds only comments (2 line(s)), no YAML content"),
    ("just a string\n", "1:1", "expected a mapping with the key test_suite_config, found the value 'just a string'"),
    ("- a\n- b\n", "1:1", "found a list"),
])
def test_empty_and_comment_only_files_are_explained(tree: Path, capsys: pytest.CaptureFixture[str], content: str,
                                                    where: str, fragment: str) -> None:
    cfg = tree / "odd.yaml"
    cfg.write_text(content)
    assert main(["validate", str(cfg)]) == 2
    (line, *_rest) = [x for x in capsys.readouterr().err.splitlines() if x.startswith(str(cfg))]
    assert line.startswith(f"{cfg}:{where}: ") and fragment in line and "testcurator schema" in line, line


def test_key_given_twice(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tree / "twice.yaml"
    cfg.write_text(GOOD.replace("      unlisted_test_mode: skip\n", "      unlisted_test_mode: skip\n      unlisted_test_mode: xfail\n"))
    assert main(["validate", str(cfg)]) == 2
    assert f"{cfg}:12:7: key 'unlisted_test_mode' given twice (first at line 11)" in capsys.readouterr().err


# --- schema errors do not hide the name checks --------------------------------------------------
def _problems(err: str, cfg: Path) -> list[str]:
    return [line.removeprefix(f"{cfg}:") for line in err.splitlines() if line.startswith(f"{cfg}:")]


@pytest.mark.parametrize("level", ["1", "2"])
def test_schema_errors_and_name_errors_in_one_run(tree: Path, capsys: pytest.CaptureFixture[str], level: str) -> None:
    cfg = tree / "bad.yaml"
    cfg.write_text(GOOD.replace("mode: mandatory_success", "mode: mandatory")  # a schema error in the entry...
                   .replace("TestA::test_two", "TestACPU::test_one_cpu_float32")  # ...whose second name is instantiated
                   .replace("{name: bool}", "{name: boolean}")
                   .replace("      unlisted_test_mode: skip\n", "      unlisted_test_mode: skip\n      colour: red\n")
                   + "        - names: [not a name, TestA::test_one]\n          mode: skip\n")
    assert main(["validate", "--level", level, str(cfg)]) == 2
    got = _problems(capsys.readouterr().err, cfg)
    expected = [
        "12:7: unknown key 'colour'",
        "15:36: name 'TestACPU::test_one_cpu_float32' is an instantiated name",
        "16:17: test_suite_config.files[0].tests[0].mode: unknown mode 'mandatory'",
        "19:32: test_suite_config.files[0].tests[0].edits.dtypes.exclude[0].name: unknown dtype 'boolean'",
        "25:19: test_suite_config.files[0].tests[1].names[0]: name 'not a name' is not in Class::test form",
        # located at its own column although the name before it was pruned to load the rest
        "25:31: test TestA::test_one is listed twice in this file (first at line 15)",
    ]
    if level == "2":  # the upstream file defines only test_x: the entries are stale
        expected[1:1] = ["15:11: stale entry: TestA::test_one is not defined in test_a.py"]
        expected[-1:-1] = ["25:11: stale entry: TestA::test_one is not defined in test_a.py"]
    assert len(got) == len(expected) + (level == "2"), got  # level 2: also TestACPU's own stale line
    for want in expected:
        assert any(line.startswith(want) for line in got), (want, got)
    assert "were not run" not in "\n".join(got)


def test_a_file_that_does_not_load_says_its_name_checks_did_not_run(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    configs = tree / "configs"
    configs.mkdir()
    (configs / "a.yaml").write_text(GOOD.replace("  labels: [trunk]", "  labels: [trunk"))
    (configs / "b.yaml").write_text(GOOD.replace("test/test_a.py", "test/test_b.py")
                                    .replace("TestA::test_two", "TestACPU::test_one_cpu_float32"))
    (tree / "test" / "test_b.py").write_text("def test_x():\n    pass\n")
    assert main(["validate", str(configs)]) == 2
    err = capsys.readouterr().err
    a = _problems(err, configs / "a.yaml")
    assert a[0].startswith("4:9: YAML syntax error")
    assert err.index("YAML syntax error") < err.index(f"{configs / 'a.yaml'}: name checks") < err.index("b.yaml:14:36: name")
    assert "name checks (instantiated, duplicate and stale names, test paths) were not run on this file" in a[-1]
    assert "they run once those are fixed" in a[-1]


def test_load_config_still_stops_at_schema_errors(tree: Path) -> None:
    """Only `validate` prunes: what runs tests never sees a partly loaded config."""
    from testcurator.config.loader import load_config
    from testcurator.errors import ConfigError

    cfg = tree / "bad.yaml"
    cfg.write_text(GOOD.replace("mode: mandatory_success", "mode: mandatory")
                   .replace("TestA::test_two", "TestACPU::test_one_cpu_float32"))
    with pytest.raises(ConfigError) as info:
        load_config(cfg, torch_root=tree)
    assert [p.location.line for p in info.value.problems] == [15]
