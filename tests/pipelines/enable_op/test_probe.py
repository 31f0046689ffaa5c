"""`enable-op OP --backend`: the capability table is consulted before a test is admitted.

The device is the curatedev example backend: with its default allowlist it has no kernel for
``aten::dot``; with every op allowed (``CURATEDEV_ALLOWED_OPS=*``) dot runs, but complex dtypes
still do not. Each case has its own state directory, so its capability table starts empty and
enable-op replays the admitted tests' calls itself.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import torch

from testcurator.cli.main import main
from testcurator.config.editor import ConfigEditor, EntrySpec
from testcurator.pipelines.enable_op.admission import EnableOptions
from testcurator.pipelines.enable_op.workflow import enable_op
from testcurator.plugin.callspec import call_key, example

REPO = Path(__file__).resolve().parents[3]
TREE = REPO / "examples" / "upstream"
BACKEND = REPO / "examples" / "backend" / "backend.yaml"
NN = "test/test_nn_modules.py"
FORWARD, REPR = f"{NN}::TestModule::test_forward", f"{NN}::TestModule::test_repr"

# The entries as the pipeline writes them; their reasons name aten::dot alone.
ENTRIES = [
    EntrySpec(("TestModule::test_forward",), "xfail_strict", "Xfail strict: the probe replayed aten::dot(float32,float32) "
              "on curatedev: missing_kernel. [offline]", {"dtypes": {"exclude": [{"name": "float64"}]}}),
    EntrySpec(("TestModule::test_repr",), "xfail_strict", "Xfail strict: every variant failed with unsupported_op "
              "(`Could not run 'aten::dot'`). [offline]"),
]


def _record(test: str, dtype: str) -> dict[str, object]:
    x = torch.ones(3, dtype=getattr(torch, dtype))
    key = call_key("aten::dot", (x, x), {})
    return {"nodeid": f"{NN}::TestModuleCPU::{test}_nn_Linear_cpu_{dtype}", "generic": f"TestModule::{test}",
            "source": "captured", "device": "cpu", "dtype": dtype, "module": "nn.Linear", "aten": ["aten::dot"],
            "calls": [key], "examples": {key: example((x, x), {})}}


# test_forward's float64 instance is excluded by its entry: its dot(float64) gap does not count.
RECORDS = [_record("test_forward", "float32"), _record("test_forward", "float64"), _record("test_repr", "complex64")]


@pytest.fixture()
def setup(kit: ModuleType, tmp_path: Path) -> tuple[Path, Path]:
    configs, state = kit.configs_and_opmap(tmp_path, {}, RECORDS)
    editor = ConfigEditor.new(configs / "test" / "test_nn_modules.yaml")
    editor.update(f"${{TORCH_ROOT}}/{NN}", ENTRIES, unlisted_test_mode="skip")
    editor.save()
    return configs, state


# allowlist -> (admitted tests, refused test -> the status the table gave its dot call)
CASES = {
    "default allowlist: no dot kernel": (None, [], {FORWARD: "missing_kernel", REPR: "missing_kernel"}),
    "every op allowed: complex still unsupported": ("*", [FORWARD], {REPR: "unsupported_dtype"}),
}


@pytest.mark.parametrize("allowed, admitted, refused", CASES.values(), ids=CASES.keys())
@pytest.mark.slow
def test_the_table_refuses_what_the_device_still_lacks(setup: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
                                                       allowed: str | None, admitted: list[str],
                                                       refused: dict[str, str]) -> None:
    configs, state = setup
    if allowed is None:
        monkeypatch.delenv("CURATEDEV_ALLOWED_OPS", raising=False)
    else:
        monkeypatch.setenv("CURATEDEV_ALLOWED_OPS", allowed)
    said: list[str] = []
    result = enable_op(EnableOptions("dot", configs, state, torch_root=TREE, backend=BACKEND), said.append)
    assert [a.key for a in result.admitted] == admitted
    held = {h["test"]: h["also"] for h in result.still_held}
    assert set(held) == set(refused)
    for key, status in refused.items():
        assert "device lacks aten::dot(" in held[key] and status in held[key]
        assert any(line.startswith(f"not admitted: {key}") for line in said)
    # OP's rows, as the table has them now: the admitted instances' calls only (not float64's).
    assert "aten::dot(float64,float64)" not in result.table
    assert result.table["aten::dot(float32,float32)"] == ("works" if allowed else "missing_kernel")
    text = (configs / "test" / "test_nn_modules.yaml").read_text(encoding="utf-8")
    assert text.count("Admitted by enable-op dot") == len(admitted)


def test_without_the_table_the_reason_alone_admits_and_says_so(setup: tuple[Path, Path],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    configs, state = setup
    args = ["enable-op", "dot", "--config", str(configs), "--state-dir", str(state), "--torch-root", str(TREE)]
    assert main([*args, "--dry-run"]) == 0
    assert "capability table was not consulted" in capsys.readouterr().out
    assert main([*args, "--backend", str(BACKEND), "--no-probe", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "admitted 2 test(s)" in out and "not consulted" not in out


def test_dtypes_the_config_does_not_declare_are_not_held_against_a_test(
        kit: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # test_forward's float64 instance lacks dot too, but the config runs float32 only.
    configs, state = kit.configs_and_opmap(tmp_path, {}, RECORDS)
    editor = ConfigEditor.new(configs / "test" / "test_nn_modules.yaml", global_={"supported_dtypes": [{"name": "float32"}]})
    editor.update(f"${{TORCH_ROOT}}/{NN}", [EntrySpec(ENTRIES[0].names, "xfail_strict", ENTRIES[0].reason)])
    editor.save()
    monkeypatch.setenv("CURATEDEV_ALLOWED_OPS", "*")
    result = enable_op(EnableOptions("dot", configs, state, torch_root=TREE, backend=BACKEND), lambda _: None)
    assert [a.key for a in result.admitted] == [FORWARD] and result.still_held == []
