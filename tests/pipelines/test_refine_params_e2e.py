"""Issue 13 item 2, end to end: a failing @parametrize value is excluded, not the test; and
a failing OpInfo variant (``div_floor_rounding``), not its op.

A device-generic file in PyTorch's style runs on the example backend (curatedev) through
the real runner (`testcurator exec`, installed entry point); `testcurator refine` reads the
runner's results and rewrites the config; the plugin then runs the rest green."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testcurator.config.loader import load_config

EXE = Path(sys.executable).with_name("testcurator")
BACKEND = Path(__file__).resolve().parents[2] / "examples" / "backend" / "backend.yaml"

UPSTREAM = textwrap.dedent('''
    import torch
    from torch.testing._internal.common_device_type import instantiate_device_type_tests
    from torch.testing._internal.common_utils import TestCase, parametrize


    def _shape_name(shape):
        return "x".join(str(s) for s in shape)


    class TestReduceParams(TestCase):
        @parametrize("shape", [(2, 3), (4,), (0,)], name_fn=_shape_name)
        def test_mean_of_ones(self, device, shape):
            # The mean of an empty tensor is nan: the (0,) shape fails, on any device.
            self.assertEqual(torch.ones(shape, device=device).mean().item(), 1.0)

        @parametrize("reduction", ["sum", "mean", "prod"])
        def test_reduction(self, device, reduction):
            # prod is not among curatedev's supported ops: only that value fails there.
            getattr(torch, reduction)(torch.ones(2, 3, device=device))

        def test_plain(self, device):
            self.assertEqual(torch.ones(2, device=device).sum().item(), 2.0)


    instantiate_device_type_tests(TestReduceParams, globals())
''')

# div's three OpInfo variants (no_rounding_mode, trunc_rounding, floor_rounding) pass their
# rounding mode as sample kwargs, as upstream test_binary_ufuncs reads them.
DIV_VARIANTS = textwrap.dedent('''
    import torch
    from torch.testing._internal.common_device_type import instantiate_device_type_tests, ops
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.common_utils import TestCase


    class TestDivVariants(TestCase):
        @ops([op for op in op_db if op.name == "div"], allowed_dtypes=(torch.float32,))
        def test_quotient_toward_zero(self, device, dtype, op):
            # -7 / 2: no rounding gives -3.5, trunc -3, floor -4; only floor moves away from zero.
            x = torch.tensor([-7.0], device=device, dtype=dtype)
            kwargs, _ = op.sample_kwargs(device, dtype, x)
            self.assertLessEqual(op(x, torch.tensor([2.0], device=device, dtype=dtype), **kwargs).abs().item(), 3.5)


    instantiate_device_type_tests(TestDivVariants, globals())
''')

DRAFT = """\
test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test/test_reduce_params.py
      unlisted_test_mode: skip
      tests:
        - names: [TestReduceParams::test_mean_of_ones, TestReduceParams::test_reduction, TestReduceParams::test_plain]
          mode: mandatory_success
    - path: ${TORCH_ROOT}/test/test_div_variants.py
      tests:
        - names: [TestDivVariants::test_quotient_toward_zero]
          mode: mandatory_success
"""


def _tc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTORCH_PRINT_REPRO_ON_FAILURE": "0", "COLUMNS": "200"}
    return subprocess.run([str(EXE), *args], cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def _outcomes(root: Path, out: str, file: str) -> dict[str, dict[str, object]]:
    """Test name -> record, for one file's records of a run."""
    records = [json.loads(line) for line in (root / out / "results.jsonl").read_text().splitlines()]
    return {r["nodeid"].rsplit("::", 1)[1]: r for r in records if r["nodeid"].startswith(f"test/{file}::")}


def _exec(root: Path, out: str) -> subprocess.CompletedProcess[str]:
    return _tc("exec", "--config", str(root / "curate.yaml"), "--torch-root", str(root), "--backend", str(BACKEND),
               "--out", str(root / out), "--quiet", "--retries", "0", cwd=root)


@pytest.fixture(scope="module")
def refined(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("params-e2e")
    (root / "test").mkdir()
    (root / "test" / "test_reduce_params.py").write_text(UPSTREAM)
    (root / "test" / "test_div_variants.py").write_text(DIV_VARIANTS)
    (root / "curate.yaml").write_text(DRAFT)
    (root / "draft.yaml").write_text(DRAFT)  # what review compares the refined config with
    draft = _exec(root, "draft")
    assert draft.returncode == 1, draft.stdout[-3000:] + draft.stderr[-3000:]  # the draft's mandatory failures
    refine = _tc("refine", "--config", str(root / "curate.yaml"), "--torch-root", str(root),
                 "--results", str(root / "draft" / "results.jsonl"), "--out", str(root / "refine"), cwd=root)
    assert refine.returncode == 0, refine.stdout[-3000:] + refine.stderr[-3000:]
    return root


@pytest.mark.slow
def test_runner_records_carry_params(refined: Path) -> None:
    by_name = _outcomes(refined, "draft", "test_reduce_params.py")
    # name_fn names the shape "0" in the instance name; the record keeps the live value.
    assert by_name["test_mean_of_ones_0_curatedev"]["params"] == [["shape", "(0,)"]]
    assert by_name["test_reduction_reduction_prod_curatedev"]["params"] == [["reduction", "'prod'"]]
    assert by_name["test_plain_curatedev"]["params"] == []
    failed = sorted(n for n, r in by_name.items() if r["outcome"] == "failed")
    assert failed == ["test_mean_of_ones_0_curatedev", "test_reduction_reduction_prod_curatedev"]


def test_refine_excludes_exactly_the_failing_value(refined: Path) -> None:
    file = load_config(refined / "curate.yaml", torch_root=refined).files[0]
    excluded = {}
    for test in ("test_mean_of_ones", "test_reduction", "test_plain"):
        entry = file.entry_for(f"TestReduceParams::{test}")
        assert entry is not None and entry.mode == "mandatory_success", (test, entry)
        params = entry.edits.params if entry.edits is not None else None
        excluded[test] = [(p.name, v) for p in params.exclude for v in p.values] if params else []
        assert not (entry.edits and (entry.edits.dtypes or entry.edits.ops or entry.edits.modules))
    assert excluded == {"test_mean_of_ones": [("shape", "0")], "test_reduction": [("reduction", "prod")],
                        "test_plain": []}
    reason = file.entry_for("TestReduceParams::test_reduction").reason or ""
    assert "parameter reduction=prod" in reason and "test_reduction_reduction_prod_curatedev" in reason


def test_review_shows_the_exclusion(refined: Path) -> None:
    proc = _tc("review", str(refined / "draft.yaml"), str(refined / "curate.yaml"), cwd=refined)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    text = " ".join(proc.stdout.split())
    assert "shape=0" in text and "reduction=prod" in text, text[-2000:]


@pytest.mark.slow
def test_refined_config_runs_the_rest_green(refined: Path) -> None:
    proc = _exec(refined, "after")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    outcomes = {n: r["outcome"] for n, r in _outcomes(refined, "after", "test_reduce_params.py").items()}
    assert outcomes["test_mean_of_ones_0_curatedev"] == outcomes["test_reduction_reduction_prod_curatedev"] == "skipped"
    assert sorted(n for n, o in outcomes.items() if o == "passed") == [
        "test_mean_of_ones_2x3_curatedev", "test_mean_of_ones_4_curatedev", "test_plain_curatedev",
        "test_reduction_reduction_mean_curatedev", "test_reduction_reduction_sum_curatedev"]


@pytest.mark.slow
def test_records_name_the_opinfo_and_its_variant(refined: Path) -> None:
    by_name = _outcomes(refined, "draft", "test_div_variants.py")
    assert {(r["op"], r["op_variant"], r["outcome"]) for r in by_name.values()} == {
        ("div", "no_rounding_mode", "passed"), ("div", "trunc_rounding", "passed"), ("div", "floor_rounding", "failed")}


def test_refine_excludes_the_failing_variant_not_its_op(refined: Path) -> None:
    file = load_config(refined / "curate.yaml", torch_root=refined).files[1]
    entry = file.entry_for("TestDivVariants::test_quotient_toward_zero")
    assert entry is not None and entry.mode == "mandatory_success", entry
    assert entry.edits is not None and entry.edits.ops is not None
    assert [r.name for r in entry.edits.ops.exclude] == ["div_floor_rounding"]
    assert "div_floor_rounding" in (entry.reason or "")


@pytest.mark.slow
def test_the_other_variants_still_run(refined: Path) -> None:
    outcomes = {n: r["outcome"] for n, r in _outcomes(refined, "after", "test_div_variants.py").items()}
    assert outcomes == {"test_quotient_toward_zero_div_floor_rounding_curatedev_float32": "skipped",
                        "test_quotient_toward_zero_div_no_rounding_mode_curatedev_float32": "passed",
                        "test_quotient_toward_zero_div_trunc_rounding_curatedev_float32": "passed"}
