"""--curate-capture-ops on tests that call torch.compile: a ``compile`` record beside the eager one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testcurator.memory.opmap import OpMap

pytest_plugins = ("pytester",)

COMPILED_TESTS = '''
import torch
import torch.nn.functional as F
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase


class TestComp(TestCase):
    @dtypes(torch.float32)
    def test_silu(self, device, dtype):
        x = torch.randn(8, device=device, dtype=dtype)
        # The test asks for inductor: capture compiles with its recording backend instead,
        # so no C++ compiler is needed and the graph's aten ops are read exactly.
        compiled = torch.compile(lambda t: F.silu(t), fullgraph=True)
        self.assertEqual(compiled(x), x * torch.sigmoid(x))

    @dtypes(torch.float32)
    def test_backward(self, device, dtype):
        x = torch.randn(3, 4, device=device, dtype=dtype, requires_grad=True)
        torch.compile(lambda t: F.gelu(t).sum(), backend="aot_eager")(x).backward()
        self.assertEqual(x.grad.shape, x.shape)

    def test_compiled_then_fails(self, device):
        torch.compile(torch.neg, backend="eager")(torch.ones(2, device=device))
        self.assertTrue(False)

    def test_eager(self, device):
        torch.ones(2, device=device).neg()


instantiate_device_type_tests(TestComp, globals(), only_for="cpu")
'''


def records(path: Path) -> dict[tuple[str, str], dict]:
    out = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        out[(rec["nodeid"].rsplit("::", 1)[1], rec["source"])] = rec
    return out


@pytest.mark.slow
def test_compiled_graphs_are_recorded_as_compile_source(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_comp=COMPILED_TESTS)
    result = pytester.runpytest_subprocess("--curate-capture-ops", "ops.jsonl", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=1)
    recs = records(pytester.path / "ops.jsonl")
    silu = recs[("test_silu_cpu_float32", "compile")]
    assert silu["aten"] == ["aten::silu"] and silu["outcome"] == "passed" and silu["error"] is None
    # The eager record keeps what ran outside the compiled graph: the reference, not silu.
    eager = set(recs[("test_silu_cpu_float32", "captured")]["aten"])
    assert {"aten::sigmoid", "aten::mul.Tensor"} <= eager and "aten::silu" not in eager
    # Forward and backward graphs both count.
    assert {"aten::gelu", "aten::gelu_backward"} <= set(recs[("test_backward_cpu_float32", "compile")]["aten"])
    assert recs[("test_compiled_then_fails_cpu", "compile")]["outcome"] == "failed"
    assert ("test_eager_cpu", "compile") not in recs and ("test_eager_cpu", "captured") in recs

    opmap = OpMap(tmp_path / "state")
    stats = opmap.ingest(pytester.path / "ops.jsonl")
    assert (stats.captured, stats.compiled) == (4, 3)
    hits = opmap.tests_for("aten::silu")
    assert [(h.generic, h.source) for h in hits] == [("TestComp::test_silu", "compile")]
    assert opmap.counts()["compile"] == 3
    opmap.close()

    # enable-op finds the test through the compile record alone (eager never ran silu).
    from testcurator.pipelines.enable_op.workflow import exercising

    using, as_opinfo = exercising(tmp_path / "state", "aten::silu")
    assert using == {"test_comp.py::TestComp::test_silu"} and as_opinfo == set()


@pytest.mark.slow
def test_plain_capture_records_outcomes_only(pytester: pytest.Pytester) -> None:
    # --curate-capture-plain confirms a failure seen under capture: neither the dispatch mode nor
    # the recording backend (which runs a compiled graph as aot_eager: upstream test_content_store's
    # storage hash, compiled, failed with "xor_sum only implemented with inductor" under it).
    pytester.makepyfile(test_comp=COMPILED_TESTS)
    result = pytester.runpytest_subprocess("--curate-capture-ops", "ops.jsonl", "--curate-capture-plain",
                                           "-p", "no:cacheprovider", "-k", "backward or then_fails or eager")
    result.assert_outcomes(passed=2, failed=1)
    recs = records(pytester.path / "ops.jsonl")
    assert {source for _, source in recs} == {"captured"}
    assert {name: (rec["outcome"], rec["aten"]) for (name, _), rec in recs.items()} == {
        "test_backward_cpu_float32": ("passed", []), "test_compiled_then_fails_cpu": ("failed", []),
        "test_eager_cpu": ("passed", [])}


# A test whose own compiler must be the one that runs: under capture the recording backend
# compiles its frame instead, and fails it; the plain rerun compiles it again (dynamo reset)
# with the test's backend, and passes.
OWN_BACKEND = '''
import torch

CALLS = []


def counting(gm, example_inputs):
    CALLS.append(len(gm.graph.nodes))
    return gm.forward


def test_own_backend():
    CALLS.clear()
    torch.compile(torch.neg, backend=counting)(torch.ones(2))
    assert CALLS, "the test's backend never compiled"
'''


@pytest.mark.slow
def test_the_plain_rerun_of_a_failure_compiles_afresh(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_own=OWN_BACKEND)
    result = pytester.runpytest_subprocess("--curate-capture-ops", "ops.jsonl", "--curate-capture-confirm",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)  # pytest's report is the run under capture
    recs = records(pytester.path / "ops.jsonl")
    eager = recs[("test_own_backend", "captured")]
    assert (eager["outcome"], eager.get("mode_failure")) == ("passed", True)
    assert recs[("test_own_backend", "compile")]["aten"] == ["aten::neg"]  # the first run's graph, once
