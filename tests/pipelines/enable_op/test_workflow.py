"""`testcurator enable-op OP`: admit what only OP held back; with --execute, keep what passes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from testcurator.cli.main import main
from testcurator.memory.opmap import OpMap

REPO = Path(__file__).resolve().parents[3]
TREE = REPO / "examples" / "upstream"
BACKEND = REPO / "examples" / "backend" / "backend.yaml"
OPS, NN = "test/test_ops.py", "test/test_nn_modules.py"

OPS_YAML = """\
test_suite_config:
  schema_version: 1
  global:
    supported_dtypes: [{name: float32}, {name: int64}]
    supported_ops:
      - name: add
      - name: matmul
      - name: div
      - name: linalg.det
  files:
    - path: ${TORCH_ROOT}/test/test_ops.py
      unlisted_test_mode: skip
      tests:
        # matmul, div excluded after failures. [offline]
        - names:
            - TestCommon::test_out_argument
          mode: mandatory_success
          edits:
            ops:
              exclude:
                - name: div
                - name: linalg.det
                - name: matmul
        # Only div excluded.
        - names:
            - TestCommon::test_compare_cpu
          mode: mandatory_success
          edits:
            ops:
              exclude:
                - name: div
"""
NN_YAML = """\
test_suite_config:
  schema_version: 1
  files:
    - path: ${TORCH_ROOT}/test/test_nn_modules.py
      unlisted_test_mode: skip
      tests:
        # Xfail strict: failed with unsupported_op (`Could not run 'aten::dot' with arguments`).
        - names:
            - TestModule::test_forward
          mode: xfail_strict
        # HUMAN: needs aten::dot and aten::addmv both.
        - names:
            - TestModule::test_repr
          mode: xfail
        # Skip: onlyCUDA.
        - names:
            - TestModule::test_cpu_gpu_parity
          mode: skip
"""
# The op map: static OpInfo instances, and what the CPU capture saw.
RECORDS = [
    {"nodeid": f"{OPS}::TestCommonCPU::test_out_argument_matmul_cpu_float32", "generic": "TestCommon::test_out_argument",
     "source": "static", "op": "matmul", "dtype": "float32"},
    {"nodeid": f"{OPS}::TestCommonCPU::test_compare_cpu_matmul_cpu_float32", "generic": "TestCommon::test_compare_cpu",
     "source": "static", "op": "matmul", "dtype": "float32"},
    {"nodeid": f"{OPS}::TestCommonCPU::test_compare_cpu_mul_cpu_float32", "generic": "TestCommon::test_compare_cpu",
     "source": "static", "op": "mul", "dtype": "float32"},
    {"nodeid": f"{NN}::TestModuleCPU::test_repr_nn_Linear_cpu_float32", "generic": "TestModule::test_repr",
     "source": "captured", "aten": ["aten::dot", "aten::addmv"]},
    {"nodeid": f"{NN}::TestModuleCPU::test_cpu_gpu_parity_nn_Linear_cpu_float32", "generic": "TestModule::test_cpu_gpu_parity",
     "source": "captured", "aten": ["aten::dot"]},
]


@pytest.fixture()
def setup(kit: ModuleType, tmp_path: Path) -> tuple[Path, Path]:
    return kit.configs_and_opmap(tmp_path, {"test/test_ops.yaml": OPS_YAML, "test/test_nn_modules.yaml": NN_YAML},
                                 RECORDS)


def _enable(op: str, configs: Path, state: Path, *extra: str) -> int:
    return main(["enable-op", op, "--config", str(configs), "--state-dir", str(state), "--torch-root", str(TREE), *extra])


# op -> {test: (mode, ops excluded)} for every entry that must change; all others stay.
ADMIT = [
    ("matmul", {f"{OPS}::TestCommon::test_out_argument": ("mandatory_success", ("div", "linalg.det"))}),
    ("aten::dot", {f"{NN}::TestModule::test_forward": ("mandatory_success", ())}),
    ("dot", {f"{NN}::TestModule::test_forward": ("mandatory_success", ())}),
    ("mul", {}),  # only a global capability change (checked below)
    ("aten::relu", {}),
]


@pytest.mark.parametrize("op,changed", ADMIT, ids=[a[0] for a in ADMIT])
def test_admissions(kit: ModuleType, setup: tuple[Path, Path], op: str, changed: dict[str, tuple[str, tuple[str, ...]]],
                    tmp_path: Path) -> None:
    configs, state = setup
    before = kit.entries(configs, TREE)
    original = kit.config_bytes(configs)
    assert _enable(op, configs, state, "--dry-run") == 0
    assert kit.config_bytes(configs) == original
    assert _enable(op, configs, state) == 0
    after = kit.entries(configs, TREE)
    assert set(after) == set(before) | set(changed)
    for key, entry in after.items():
        if key in changed:
            assert entry.mode == changed[key][0]
            assert entry.reason.startswith(f"Admitted by enable-op {op}")
        else:
            assert (entry.mode, entry.reason) == (before[key].mode, before[key].reason), key
    from testcurator.config.loader import load_config

    loaded = load_config(configs, torch_root=TREE)
    checked = set()
    for file in loaded.files:
        for e in file.entries:
            excluded = tuple(o.name for o in (e.edits.ops.exclude if e.edits and e.edits.ops else []))
            for name in e.names:
                key = f"{file.resolved_path.relative_to(TREE).as_posix()}::{name}"
                if key in changed:
                    assert excluded == changed[key][1]
                    checked.add(key)
    assert checked == set(changed)  # each admitted entry's ops edit was read back
    ops_file = loaded.files[[f.raw_path for f in loaded.files].index("${TORCH_ROOT}/" + OPS)]
    declared = [o.name for o in ops_file.capabilities.supported_ops or []]
    assert ("mul" in declared) == (op == "mul")


def test_more_than_one_missing_op_is_still_held(setup: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from testcurator.pipelines.enable_op.admission import EnableOptions
    from testcurator.pipelines.enable_op.workflow import enable_op

    configs, state = setup
    result = enable_op(EnableOptions("aten::dot", configs, state, torch_root=TREE, dry_run=True), lambda m: None)
    assert [a.key for a in result.admitted] == [f"{NN}::TestModule::test_forward"]
    assert result.still_held == [{"test": f"{NN}::TestModule::test_repr", "mode": "xfail", "also": "addmv"}]
    assert "TestModule::test_forward" in result.diff and "mandatory_success" in result.diff


@pytest.mark.parametrize("dry_run", [True, False])
def test_the_diff_names_the_real_configs_not_temporary_copies(setup: tuple[Path, Path], dry_run: bool) -> None:
    from testcurator.pipelines.enable_op.admission import EnableOptions
    from testcurator.pipelines.enable_op.workflow import enable_op

    configs, state = setup
    said: list[str] = []
    enable_op(EnableOptions("aten::dot", configs, state, torch_root=TREE, dry_run=dry_run), said.append)
    text = "\n".join(said)
    assert "enable-op-" not in text and "/before" not in text and "/after" not in text  # the temporary copies
    header = next(line for line in text.splitlines() if line.startswith("## "))
    assert header == (f"## testcurator config review: `{configs}` -> `{configs} with aten::dot enabled"
                      + (" (--dry-run: not written)`" if dry_run else "`"))
    assert said[-1] == ("would change (--dry-run): " if dry_run else "changed: ") + str(configs / "test/test_nn_modules.yaml")


def test_no_op_map_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    shutil.copy(BACKEND, tmp_path / "c" / "x.txt")
    assert _enable("add", tmp_path / "c", tmp_path / "empty-state") == 2


EXEC_YAML = """\
test_suite_config:
  schema_version: 1
  global:
    supported_dtypes: [{name: float32}, {name: float16}]
  files:
    - path: ${TORCH_ROOT}/test/test_ops.py
      unlisted_test_mode: skip
      tests:
%s
"""
ENTRY = """\
        # %s failed before. [offline]
        - names:
            - TestCommon::%s
          mode: mandatory_success
          edits:
            ops:
              exclude:
                - name: div
                - name: linalg.det
                - name: matmul"""
# curatedev's default allowlist (examples/backend/curatedev/_policy.py) plus what matmul needs.
ALLOWED = ("add,sub,mul,div,neg,abs,exp,log,sqrt,rsqrt,sin,cos,tanh,sigmoid,relu,clamp,maximum,minimum,sum,mean,mm,"
           "addmm,bmm,eq,ne,lt,le,gt,ge,where,cat,isnan,bitwise_and,bitwise_or,all")


@pytest.mark.slow
def test_execute_keeps_what_passes(kit: ModuleType, setup: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """matmul enabled on curatedev by allowing dot and mv: test_out_argument's matmul variants
    pass; test_compare_cpu's float16 variant needs addmv too, so matmul stays excluded there."""
    configs, state = setup
    (configs / "test" / "test_nn_modules.yaml").unlink()
    entries = "\n".join(ENTRY % (name, name) for name in ("test_out_argument", "test_compare_cpu"))
    (configs / "test" / "test_ops.yaml").write_text(EXEC_YAML % entries, encoding="utf-8")
    monkeypatch.setenv("CURATEDEV_ALLOWED_OPS", ALLOWED + ",dot,mv")
    assert _enable("matmul", configs, state, "--execute", "--backend", str(BACKEND)) == 0
    from testcurator.config.loader import load_config

    (file,) = load_config(configs, torch_root=TREE).files
    excluded = {e.names[0]: [o.name for o in e.edits.ops.exclude] for e in file.entries}
    reasons = {e.names[0]: e.reason or "" for e in file.entries}
    assert excluded == {"TestCommon::test_out_argument": ["div", "linalg.det"],
                        "TestCommon::test_compare_cpu": ["div", "linalg.det", "matmul"]}
    assert reasons["TestCommon::test_out_argument"].startswith("Admitted by enable-op matmul")
    assert "failed on the device with unsupported_op" in reasons["TestCommon::test_compare_cpu"]
    assert "aten::addmv" in reasons["TestCommon::test_compare_cpu"]
    assert all(e.mode == "mandatory_success" for e in file.entries)
    runs = list((state / "enable-op").glob("matmul-*/exec/results.jsonl"))
    assert len(runs) == 1
    records = [json.loads(line) for line in runs[0].read_text(encoding="utf-8").splitlines() if line.strip()]
    assert {r["outcome"] for r in records if "_matmul_" in r["nodeid"] and "out_argument" in r["nodeid"]} == {"passed"}


def test_enable_op_reads_a_wrapped_reason_back_whole(tmp_path: Path) -> None:
    """Issue 9: a node id in a reason came back split at the wrap ("...CURATEDEV::test _compare_cpu")."""
    from testcurator.config.editor import ConfigEditor, EntrySpec
    from testcurator.pipelines.enable_op.admission import EnableOptions
    from testcurator.pipelines.enable_op.workflow import enable_op

    long_id = f"{OPS}::TestCommonCURATEDEV::test_python_ref_executor__refs_nn_functional_binary_cross_entropy_curatedev_float32"
    reason = f"Xfail strict: {long_id} failed with unsupported_op (`Could not run 'aten::dot' with arguments`)."
    configs, state = tmp_path / "configs", tmp_path / "state"
    editor = ConfigEditor.new(configs / "test" / "test_ops.yaml")
    editor.update(f"${{TORCH_ROOT}}/{OPS}", [EntrySpec(("TestCommon::test_out_argument",), "xfail_strict", reason)],
                  unlisted_test_mode="skip")
    editor.save()
    capture = tmp_path / "ops.jsonl"
    capture.write_text(json.dumps({"nodeid": f"{OPS}::TestCommonCPU::test_out_argument_add_cpu_float32",
                                   "generic": "TestCommon::test_out_argument", "source": "captured",
                                   "aten": ["aten::dot"]}) + "\n", encoding="utf-8")
    opmap = OpMap(state)
    opmap.ingest(capture)
    opmap.close()
    result = enable_op(EnableOptions("aten::dot", configs, state, torch_root=TREE, dry_run=True), lambda m: None)
    [admitted] = result.admitted
    assert admitted.spec is not None and admitted.spec.reason is not None
    assert admitted.spec.reason.endswith(f"Before: {reason}")
