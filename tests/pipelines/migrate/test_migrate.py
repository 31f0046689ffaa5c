"""Migrating a hand-kept skip list (issue 16): a file that does not load, variants only the
device has, a forgotten --as-device, substring patterns, level-2 validation of the result.

The upstream files are small reproductions in PyTorch's style; collection is real (a child
pytest), and the command runs through the installed entry point.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testcurator.config.loader import load_config
from testcurator.pipelines.migrate.match import guess_device
from testcurator.pipelines.migrate.report import ImportReport, unplaced_exceeds
from testcurator.pipelines.migrate.importers import import_skip_list
from testcurator.runner.collect import CollectedTest, collect

UPSTREAM = textwrap.dedent(
    '''
    import torch
    from torch.testing._internal.common_utils import TestCase, parametrize
    from torch.testing._internal.common_device_type import (
        instantiate_device_type_tests, dtypes, dtypesIfCUDA, ops)
    from torch.testing._internal.common_methods_invocations import op_db

    OPS = [o for o in op_db if o.name in ("add", "mul") and not o.variant_test_name]

    class TestDev(TestCase):
        @dtypesIfCUDA(torch.float32, torch.float16)
        @dtypes(torch.float32)
        def test_half_elsewhere(self, device, dtype):
            pass

        @dtypesIfCUDA(torch.float32, torch.int64, torch.complex32)
        @dtypes(torch.float32, torch.int64)
        def test_both(self, device, dtype):
            pass

        @ops(OPS, allowed_dtypes=(torch.float32,))
        def test_op(self, device, dtype, op):
            pass

        @parametrize("fused", [False, True])
        @dtypesIfCUDA(torch.float32, torch.float16)
        @dtypes(torch.float32)
        def test_mha(self, device, dtype, fused):
            pass

        def test_jiterator_unary(self, device):
            pass

        def test_jiterator_binary(self, device):
            pass

    class TestGpuOnly(TestCase):
        def test_streams(self, device):
            pass

    instantiate_device_type_tests(TestDev, globals(), only_for="cpu")
    instantiate_device_type_tests(TestGpuOnly, globals(), only_for="cuda")
    '''
)

# Version skew: a name the installed torch no longer has.
BROKEN = "from torch.testing._internal.common_device_type import onlyOnCPUAndCUDA\n"

SKIP_LIST = textwrap.dedent(
    '''
    PYTORCH_TEST_DIR = "../../../../test"

    skip_dict = {
        "test_dev_xpu.py": (
            # Half is not enabled for this kernel on XPU
            "test_half_elsewhere_xpu_float16",
            "test_both_xpu_complex32",  # complex32 exists only on the device
            # oneDNN: int64 is not supported
            "test_both_xpu_int64",
            "test_op_add_xpu_float8_e4m3fn",
            "test_op_mul_xpu_float32",
            "test_mha_fused_False_xpu_float16",
            "test_streams_xpu",
            "test_half_elsewhere_xpu_bfloat16",  # upstream declares no bfloat16 for any device

            "_jiterator_",
            "test_removed_long_ago_xpu",
        ),
        f"{PYTORCH_TEST_DIR}/test_skew.py": ("test_a_xpu", "test_b_xpu"),
        "test_whole_xpu.py": None,
        "test_gone_xpu.py": ("test_x_xpu",),
    }
    '''
)


@pytest.fixture(scope="module")
def torch_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("torch")
    (root / "test").mkdir()
    (root / "test" / "test_dev.py").write_text(UPSTREAM)
    (root / "test" / "test_skew.py").write_text(BROKEN)
    return root


@pytest.fixture(scope="module")
def collected(torch_root: Path) -> list[CollectedTest]:
    return collect([torch_root / "test" / "test_dev.py"], rootdir=torch_root)


@pytest.fixture
def skip_list(tmp_path: Path) -> Path:
    path = tmp_path / "skip_list_common.py"
    path.write_text(SKIP_LIST)
    return path


def _rows(report: ImportReport) -> dict[str, object]:
    return {r.pattern: r for r in report.rows}


@pytest.mark.slow
def test_device_only_variants_are_placed_on_test_op_and_dtype(skip_list: Path, torch_root: Path,
                                                             collected: list[CollectedTest], tmp_path: Path) -> None:
    report = import_skip_list(skip_list, torch_root=torch_root, out_dir=tmp_path / "c", as_device="xpu",
                              collected=collected)
    rows = _rows(report)
    kinds = {p: r.kind for p, r in rows.items()}  # type: ignore[attr-defined]
    assert kinds["test_half_elsewhere_xpu_float16"] == "device-only"  # half only via @dtypesIfCUDA
    assert kinds["test_both_xpu_complex32"] == kinds["test_op_add_xpu_float8_e4m3fn"] == "device-only"
    assert kinds["test_streams_xpu"] == "device-only"  # the class is not instantiated for cpu at all
    assert kinds["test_both_xpu_int64"] == "exact"
    assert "other variant" in rows["test_mha_fused_False_xpu_float16"].reason  # type: ignore[attr-defined]
    entries = {n: e for e in load_config(tmp_path / "c", torch_root=torch_root).files[0].entries for n in e.names}
    # One entry per test: the exact int64 hit and the device-only complex32 together.
    both = entries["TestDev::test_both"]
    assert both.mode == "mandatory_success" and [d.name for d in both.edits.dtypes.exclude] == ["complex32", "int64"]
    assert [d.name for d in entries["TestDev::test_half_elsewhere"].edits.dtypes.exclude] == ["bfloat16", "float16"]
    ops = {o.name: [d.name for d in o.dtypes or []] for o in entries["TestDev::test_op"].edits.ops.exclude}
    assert ops == {"add": ["float8_e4m3fn"], "mul": []}  # every cpu instance of mul matched: the whole op
    assert entries["TestGpuOnly::test_streams"].mode == "skip" and entries["TestGpuOnly::test_streams"].edits is None
    # Nothing left without a reason.
    unmatched = {p: r.reason for p, r in rows.items()  # type: ignore[attr-defined]
                 if r.kind == "unmatched" and r.file == "test/test_dev.py"}  # type: ignore[attr-defined]
    assert set(unmatched) == {"test_removed_long_ago_xpu"} and "removed or renamed" in unmatched["test_removed_long_ago_xpu"]


def test_notes_stay_next_to_the_dtype_they_explain(skip_list: Path, torch_root: Path, collected: list[CollectedTest],
                                                   tmp_path: Path) -> None:
    import_skip_list(skip_list, torch_root=torch_root, out_dir=tmp_path / "c", as_device="xpu", collected=collected)
    entries = {n: e for e in load_config(tmp_path / "c", torch_root=torch_root).files[0].entries for n in e.names}
    reason = entries["TestDev::test_both"].reason or ""
    # Each note is followed by the pattern it explains: the trailing one by complex32, the block one by int64.
    assert reason.index("complex32 exists only on the device") < reason.index("'test_both_xpu_complex32'")
    assert reason.index("oneDNN: int64 is not supported -- on 'test_both_xpu_int64'") > reason.index("complex32")
    # The block above reaches every pattern under it, the trailing note adds to it.
    assert ("Half is not enabled for this kernel on XPU complex32 exists only on the device -- on "
            "'test_both_xpu_complex32'") in reason


def test_substring_patterns_are_flagged_for_a_human(skip_list: Path, torch_root: Path, collected: list[CollectedTest],
                                                    tmp_path: Path) -> None:
    report = import_skip_list(skip_list, torch_root=torch_root, out_dir=tmp_path / "c", as_device="xpu",
                              collected=collected)
    row = _rows(report)["_jiterator_"]
    assert row.kind == "substring"  # type: ignore[attr-defined]
    entries = {n: e for e in load_config(tmp_path / "c", torch_root=torch_root).files[0].entries for n in e.names}
    assert "NEEDS REVIEW: substring pattern '_jiterator_'" in (entries["TestDev::test_jiterator_binary"].reason or "")


def test_a_forgotten_as_device_is_inferred_and_said(skip_list: Path, torch_root: Path, collected: list[CollectedTest],
                                                    tmp_path: Path) -> None:
    report = import_skip_list(skip_list, torch_root=torch_root, out_dir=tmp_path / "c", collected=collected)
    assert report.notes and "inferred --as-device xpu" in report.notes[0]
    assert _rows(report)["test_both_xpu_int64"].kind == "exact"  # type: ignore[attr-defined]
    literal = import_skip_list(skip_list, torch_root=torch_root, out_dir=tmp_path / "d", as_device="cpu",
                               collected=collected)
    assert not literal.notes
    assert "pass --as-device xpu" not in _rows(literal)["test_both_xpu_int64"].reason  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("patterns", "expected"),
    [(["test_a_xpu", "test_b_xpu_float32", "test_c"], ("xpu", 2)), (["test_a_xpu", "test_b", "test_c"], None),
     (["test_a_cuda", "test_b_cuda_float16"], ("cuda", 2)), ([], None)],
)
def test_guess_device(patterns: list[str], expected: tuple[str, int] | None) -> None:
    assert guess_device(patterns) == expected


@pytest.mark.parametrize(("threshold", "fails"), [("10%", True), ("50%", False), ("1", True), ("2", False)])
def test_unplaced_threshold(threshold: str, fails: bool) -> None:
    from testcurator.pipelines.migrate.match import PatternRow

    report = ImportReport("x", rows=[PatternRow("f", p, k, (), ()) for p, k in
                                     (("a", "exact"), ("b", "device-only"), ("c", "unmatched"), ("d", "not-loaded"))])
    assert (unplaced_exceeds(report, threshold) is not None) == fails


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("testcurator")
    assert exe.is_file(), f"installed entry point missing: {exe}"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow
def test_cli_a_file_that_does_not_load_is_reported_and_the_rest_imported(skip_list: Path, torch_root: Path,
                                                                         tmp_path: Path) -> None:
    out, rep = tmp_path / "configs", tmp_path / "report.json"
    args = ["import", "skiplist", str(skip_list), "--torch-root", str(torch_root), "--out", str(out), "--report", str(rep)]
    proc = _cli(*args)
    # 3 of 12 patterns are not placed (2 in the file that does not load, 1 stale): over 10%.
    assert proc.returncode == 1, proc.stderr
    assert "error: 3 of 12 pattern(s) could not be placed" in proc.stderr
    assert "inferred --as-device xpu" in proc.stderr
    data = json.loads(rep.read_text())
    (error,) = data["load_errors"]
    assert error["file"] == "test/test_skew.py" and error["patterns"] == 2
    assert "ImportError: cannot import name 'onlyOnCPUAndCUDA'" in error["summary"]
    assert error["head"].startswith("ImportError while importing test module")
    assert data["counts"] == {"device-only": 6, "exact": 2, "not-loaded": 2, "substring": 1, "unmatched": 1}
    assert {m["file"]: (m["patterns"], m["whole_file"]) for m in data["missing_files"]} == {
        "test/test_gone.py": (1, False), "test/test_whole.py": (0, True)}
    # Level 2 of what it wrote: the one edit no device can apply.
    (problem,) = data["validation"]
    assert "dtype bfloat16 of the dtypes edit on TestDev::test_half_elsewhere never occurs in it" in problem
    assert sorted(p.name for p in out.iterdir()) == ["test_dev.yaml"]  # nothing for the file that did not load
    assert proc.stdout.rstrip().splitlines()[-2].startswith("12 pattern(s) in files of the tree")
    again = _cli(*args, "--force", "--max-unplaced", "3")
    assert again.returncode == 0, again.stderr
    bad = _cli(*args, "--force", "--max-unplaced", "many")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "--max-unplaced" in bad.stderr
