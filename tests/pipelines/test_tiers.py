"""Tiers (seed 000): L1 as a weighted set cover under a budget, L3 as probes, through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testcurator.config.apply import Applied, probe
from testcurator.plugin.oprecord import OpRecord
from testcurator.pipelines.tiers import Candidate, cover, device_nodeid, op_variant

TC = str(Path(sys.executable).with_name("testcurator"))


def c(key: str, ops: str, cost: float) -> Candidate:
    return Candidate(key, key, frozenset(ops.split()), cost)


def test_cover_takes_the_most_new_ops_per_second() -> None:
    pool = [c("big", "a b c d", 4.0), c("ab", "a b", 0.5), c("cd", "c d", 0.5), c("e", "e", 0.1), c("dup", "a", 0.01)]
    chosen, uncovered = cover(pool, budget_s=100)
    assert sorted(x.key for x in chosen) == ["ab", "cd", "e"] and uncovered == set()


def test_cover_stays_within_the_budget_and_names_what_it_misses() -> None:
    pool = [c("ab", "a b", 1.0), c("c", "c", 5.0), c("d", "d", 0.5)]
    chosen, uncovered = cover(pool, budget_s=2.0)
    assert sorted(x.key for x in chosen) == ["ab", "d"] and uncovered == {"c"}
    assert sum(x.cost for x in chosen) <= 2.0
    assert cover(pool, budget_s=0)[0] == []


def test_cover_is_deterministic() -> None:
    pool = [c(f"t{i}", f"op{i % 7} op{(i * 3) % 11}", 1.0 + i % 3) for i in range(60)]
    first = [x.key for x in cover(pool, 30)[0]]
    assert first == [x.key for x in cover(list(reversed(pool)), 30)[0]]


@pytest.mark.parametrize(("cpu", "device"), [
    ("t.py::TestFooCPU::test_bar_cpu_float32", "t.py::TestFooCURATEDEV::test_bar_curatedev_float32"),
    ("t.py::TestFooCPU::test_cpu_gpu_parity_nn_Linear_cpu_float32",
     "t.py::TestFooCURATEDEV::test_cpu_gpu_parity_nn_Linear_curatedev_float32"),
    ("t.py::TestFooCPU::test_x_cpu", "t.py::TestFooCURATEDEV::test_x_curatedev"),
    ("t.py::TestPlain::test_cpu_thing", "t.py::TestPlain::test_cpu_thing"),  # not device-generic
])
def test_device_nodeid(cpu: str, device: str) -> None:
    assert device_nodeid(cpu, "curatedev") == device


@pytest.mark.parametrize(("mode", "origin", "probed"), [
    ("skip", "capability", True), ("skip", "edit", True), ("xfail", "entry", True),
    ("skip", "entry", False), ("skip", "unlisted_test", False), ("mandatory_success", "entry", False),
    ("xfail_strict", "entry", False),
])
def test_probe_runs_only_what_the_config_holds_back(mode: str, origin: str, probed: bool) -> None:
    applied = probe(Applied(mode, "why", origin))
    assert (applied.mode == "xfail_strict" and applied.origin == "probe") is probed
    if probed:
        assert "why" in applied.reason


# --- through the CLI: a captured op map, durations, a config ---------------------------------

TREE = '''
def test_add():
    pass

def test_mul():
    pass

def test_add_and_mul():
    pass

def test_slow_everything():
    pass

def test_not_curated():
    pass
'''

CONFIG = """
test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test_t.py
      unlisted_test_mode: mandatory_success
      tests:
        - names: [test_not_curated]
          mode: skip
"""

CAPTURE = {  # generic -> aten ops it dispatched on CPU
    "test_add": ["aten::add.Tensor"], "test_mul": ["aten::mul.Tensor"],
    "test_add_and_mul": ["aten::add.Tensor", "aten::mul.Tensor"],
    "test_slow_everything": ["aten::add.Tensor", "aten::mul.Tensor", "aten::sum"],
    "test_not_curated": ["aten::div.Tensor"],
}
DURATIONS = {"test_t.py::test_add": 0.1, "test_t.py::test_mul": 0.1, "test_t.py::test_add_and_mul": 0.15,
             "test_t.py::test_slow_everything": 30.0, "test_t.py::test_not_curated": 0.1}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "test_t.py").write_text(TREE)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "t.yaml").write_text(CONFIG)
    capture = tmp_path / "captured.jsonl"
    capture.write_text("".join(json.dumps({"nodeid": f"test_t.py::{g}", "generic": g, "source": "captured",
                                           "aten": ops, "outcome": "passed"}) + "\n" for g, ops in CAPTURE.items()))
    (tmp_path / "d.json").write_text(json.dumps(DURATIONS))
    for cmd in (["ops", "ingest", str(capture)], ["durations", "import", "d.json"]):
        tc(tmp_path, *cmd, "--state-dir", "state")
    return tmp_path


def tc(cwd: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([TC, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, COLUMNS="200"))
    assert proc.returncode == code, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc


def test_tiers_then_exec_l1(project: Path) -> None:
    shown = tc(project, "tiers", "--config", "configs", "--torch-root", ".", "--budget-s", "10", "--state-dir", "state")
    data = json.loads((project / "configs" / "tiers.json").read_text())
    # The 30 s test covers everything but does not fit; two cheap tests cover add and mul.
    assert data["L1"]["nodeids"] == ["test_t.py::test_add_and_mul"]
    assert data["L1"]["ops_covered"] == 2 and data["L1"]["ops_total"] == 3 and data["L1"]["uncovered_ops"] == ["aten::sum"]
    assert data["L2"]["instances"] == 4
    assert "covers 2 of 3 ops" in shown.stdout and "aten::sum" in shown.stdout
    tc(project, "exec", "--config", "configs", "--torch-root", ".", "--tier", "L1", "--out", "l1", "-q",
       "--state-dir", "state")
    ran = [json.loads(line)["nodeid"] for line in (project / "l1" / "results.jsonl").read_text().splitlines()]
    assert ran == ["test_t.py::test_add_and_mul"]
    # A bigger budget buys the slow test, which alone covers all three.
    tc(project, "tiers", "--config", "configs", "--torch-root", ".", "--budget-s", "100", "--state-dir", "state")
    data = json.loads((project / "configs" / "tiers.json").read_text())
    assert data["L1"]["ops_covered"] == 3 and "test_t.py::test_slow_everything" in data["L1"]["nodeids"]


def test_exec_tier_errors(project: Path) -> None:
    missing = tc(project, "exec", "--config", "configs", "--torch-root", ".", "--tier", "L1", "--out", "x", code=2)
    assert "tiers file" in missing.stderr and "testcurator tiers" in missing.stderr
    bad = tc(project, "exec", "--config", "configs", "--torch-root", ".", "--tier", "L4", "--out", "x", code=2)
    assert "is not one of L1, L2, L3" in bad.stderr
    no_map = tc(project, "tiers", "--config", "configs", "--budget-s", "1", "--state-dir", "empty", code=2)
    assert "no op map" in no_map.stderr


@pytest.mark.parametrize(("name", "op", "dtype", "variant"), [
    ("test_fn_grad_div_floor_rounding_cpu_float64", "div", "float64", "floor_rounding"),
    ("test_fn_grad_div_cpu_float64", "div", "float64", None),  # no variant
    ("test_fn_grad_nn_functional_relu_cpu_float32", "nn.functional.relu", "float32", None),  # dots as underscores
    ("test_fn_grad_linalg_norm_subgradients_at_zero_cpu_float64", "linalg.norm", "float64", "subgradients_at_zero"),
    ("test_fn_grad_div_floor_rounding_cpu_float64_x_2", "div", "float64", None),  # not device, dtype last: unknown
])
def test_op_variant_is_read_from_the_instance_name(name: str, op: str, dtype: str, variant: str | None) -> None:
    """Capture records keep the OpInfo's name only; the plan's identity needs its variant, as
    the plugin's, for a config that excludes ``div_floor_rounding`` alone."""
    record = OpRecord(f"test/test_ops_gradients.py::TestBwdGradientsCPU::{name}", "TestBwdGradients::test_fn_grad",
                      "captured", device="cpu", dtype=dtype, op=op)
    assert op_variant(record) == variant
