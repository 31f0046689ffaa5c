"""--curate-capture-ops on real device-generic tests over real op_db entries, then lookups."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from testcurator.memory.opmap import OpMap
from testcurator.plugin import capture
from testcurator.plugin.recorder import ModuleCallRecorder, PythonCallRecorder, recorder_class
from testcurator.plugin.oprecord import op_name

pytest_plugins = ("pytester",)

DEVICE_GENERIC_TESTS = '''
import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests, ops
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase
from torch.utils._python_dispatch import TorchDispatchMode

OPS = [o for o in op_db if o.name in ("add", "abs", "nn.functional.relu") and not o.variant_test_name]


class PassThrough(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class TestCap(TestCase):
    @ops(OPS, allowed_dtypes=(torch.float32, torch.float16))
    def test_op(self, device, dtype, op):
        for sample in op.sample_inputs(device, dtype):
            op(sample.input, *sample.args, **sample.kwargs)

    @dtypes(torch.float32)
    def test_own_mode(self, device, dtype):
        with PassThrough():
            torch.ones(2, device=device, dtype=dtype).mul(2)

    def test_fails(self, device):
        torch.zeros(2, device=device).neg()
        self.assertTrue(False)

    def test_skips(self, device):
        self.skipTest("not today")


instantiate_device_type_tests(TestCap, globals(), only_for="cpu")
'''


@pytest.fixture(scope="module", autouse=True)
def _op_db_loaded() -> None:
    # Imported once here so pytester's in-process runs keep it (it restores sys.modules
    # to what was loaded before each run) instead of re-importing torch internals.
    import torch.testing._internal.common_methods_invocations  # noqa: F401


def read_lines(path: Path) -> dict[str, dict]:
    return {rec["nodeid"].rsplit("::", 1)[1]: rec for rec in map(json.loads, path.read_text().splitlines())}


@pytest.fixture
def captured(pytester: pytest.Pytester) -> Path:
    pytester.makepyfile(test_cap=DEVICE_GENERIC_TESTS)
    out = pytester.path / "caps" / "ops.jsonl"
    result = pytester.runpytest_inprocess("--curate-capture-ops", "caps/ops.jsonl", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=7, failed=1, skipped=1)
    return out


def test_capture_then_look_up_tests_for_an_op(captured: Path, tmp_path: Path) -> None:
    lines = read_lines(captured)
    assert len(lines) == 9
    add16 = lines["test_op_add_cpu_float16"]
    assert (add16["generic"], add16["device"], add16["dtype"], add16["op"]) == ("TestCap::test_op", "cpu", "float16", "add")
    assert "aten::add.Tensor" in add16["aten"] and add16["outcome"] == "passed"
    assert "aten::relu" in lines["test_op_nn_functional_relu_cpu_float32"]["aten"]
    # A test running its own dispatch mode still passes, and its ops are still seen.
    assert {"aten::ones", "aten::mul.Tensor"} <= set(lines["test_own_mode_cpu_float32"]["aten"])
    assert lines["test_fails_cpu"]["outcome"] == "failed" and "aten::neg" in lines["test_fails_cpu"]["aten"]
    # The failure's exception line, what a reason quotes when a test fails on CPU too.
    assert lines["test_fails_cpu"]["failure"].startswith("AssertionError") and lines["test_skips_cpu"]["failure"] is None
    assert lines["test_skips_cpu"]["outcome"] == "skipped"
    assert all(rec["error"] is None for rec in lines.values())

    # ... and after ingesting, the reverse index answers "which tests use aten::add".
    opmap = OpMap(tmp_path / "state")
    opmap.ingest(captured)
    hits = opmap.tests_for("aten::add")
    assert {h.nodeid.rsplit("::", 1)[1] for h in hits} == {"test_op_add_cpu_float32", "test_op_add_cpu_float16"}
    assert all(h.source == "captured" and h.generic == "TestCap::test_op" for h in hits)
    (half,) = opmap.tests_for("aten::add.Tensor", dtype="float16")
    assert half.dtype == "float16" and half.op == "add"
    assert {h.dtype for h in opmap.tests_for("nn.functional.relu")} == {"float32", "float16"}
    assert "aten::neg" in {u.aten for u in opmap.ops_for_test("TestCap::test_fails")}
    opmap.close()


def test_collect_only_writes_static_map(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_cap=DEVICE_GENERIC_TESTS)
    result = pytester.runpytest_inprocess("--collect-only", "-q", "--curate-capture-ops", "static.jsonl",
                                          "-p", "no:cacheprovider")
    assert result.ret == 0
    lines = read_lines(pytester.path / "static.jsonl")
    assert len(lines) == 9 and {r["source"] for r in lines.values()} == {"static"}
    assert lines["test_op_add_cpu_float32"]["aten"] == ["aten::add"]
    assert lines["test_op_nn_functional_relu_cpu_float16"]["aten"] == ["aten::relu"]
    assert lines["test_fails_cpu"]["aten"] == []
    opmap = OpMap(tmp_path)
    assert opmap.ingest(pytester.path / "static.jsonl").static == 9
    hits = opmap.tests_for("aten::add", dtype="float32")
    assert [(h.nodeid.rsplit("::", 1)[1], h.source) for h in hits] == [("test_op_add_cpu_float32", "static")]
    opmap.close()


def test_mode_that_cannot_enter_never_fails_the_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Broken:
        seen: set = set()

        def __init__(self, examples: dict | None = None) -> None:
            self.examples = examples

        def __enter__(self) -> None:
            raise RuntimeError("mode stack is busy")

    monkeypatch.setattr(capture, "recorder_class", lambda: Broken)
    pytester.makepyfile(test_plain="def test_ok():\n    assert True\n")
    result = pytester.runpytest_inprocess("--curate-capture-ops", "ops.jsonl", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    (line,) = read_lines(pytester.path / "ops.jsonl").values()
    assert line["outcome"] == "passed" and "mode stack is busy" in line["error"]


@pytest.mark.slow  # three interpreters importing torch: ~10 s on an idle 2-core machine
def test_xdist_workers_write_parts_that_ingest_reads(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_two="""
        import torch
        import pytest

        @pytest.mark.parametrize("n", range(4))
        def test_sum(n):
            assert torch.arange(n + 1).sum().item() == n * (n + 1) // 2
    """)
    (pytester.path / "ops.jsonl.gw7").write_text("stale part of an earlier run\n")
    result = pytester.runpytest_subprocess("-n", "2", "--curate-capture-ops", "ops.jsonl", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    parts = sorted(p.name for p in pytester.path.glob("ops.jsonl*"))
    assert parts == ["ops.jsonl.gw0", "ops.jsonl.gw1"]
    opmap = OpMap(tmp_path)
    assert opmap.ingest(pytester.path / "ops.jsonl").captured == 4
    assert len({h.nodeid for h in opmap.tests_for("aten::sum")}) == 4
    opmap.close()


# Fails under the capture's dispatch mode only, beside one that fails whatever the mode, with
# a module fixture (set up once, still up when the rerun needs it) and a function fixture
# (set up again for the rerun).
MODAL_TESTS = """
import pytest
import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

SETUPS = {"module": 0, "function": 0}


@pytest.fixture(scope="module")
def table():
    SETUPS["module"] += 1
    yield {"rows": 3}


@pytest.fixture
def ones():
    SETUPS["function"] += 1
    return torch.ones(3)


def test_modal(table, ones):
    total = ones.sum().item()
    assert _get_current_dispatch_mode() is None, "no mode wanted"
    assert total == table["rows"]


def test_broken(table, ones):
    assert ones.sum().item() == 4


def test_last(table):
    assert SETUPS == {"module": 1, "function": 4}
"""


@pytest.mark.parametrize("confirm", [True, False])
def test_a_failure_under_the_mode_is_run_again_plainly_in_the_same_process(
    pytester: pytest.Pytester, confirm: bool
) -> None:
    pytester.makepyfile(test_modal=MODAL_TESTS)
    args = ("--curate-capture-ops", "ops.jsonl", "-p", "no:cacheprovider") + (("--curate-capture-confirm",) * confirm)
    result = pytester.runpytest_inprocess(*args)
    # pytest's own reports are the first run's: the rerun is not logged.
    result.assert_outcomes(passed=1 if confirm else 0, failed=2 if confirm else 3)
    lines = read_lines(pytester.path / "ops.jsonl")
    assert list(lines) == ["test_modal", "test_broken", "test_last"]
    modal, broken = lines["test_modal"], lines["test_broken"]
    assert "aten::sum" in modal["aten"]  # the ops stay the mode's
    if confirm:
        assert (modal["outcome"], modal["failure"], modal["mode_failure"]) == ("passed", None, True)
    else:
        assert modal["outcome"] == "failed" and "no mode wanted" in modal["failure"] and "mode_failure" not in modal
    assert broken["outcome"] == "failed" and broken["failure"].startswith("assert") and "mode_failure" not in broken
    assert lines["test_last"]["outcome"] == ("passed" if confirm else "failed")
    # A rerun's time is recorded (test time, not the capture's); a test that passed has none.
    reran = {name for name, line in lines.items() if line.get("rerun_s") is not None}
    assert reran == ({"test_modal", "test_broken"} if confirm else set())
    assert all(isinstance(lines[name]["rerun_s"], float) and lines[name]["rerun_s"] >= 0 for name in reran)


def test_without_the_option_nothing_is_registered(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_ok(request):\n"
                        "    assert not request.config.pluginmanager.has_plugin('testcurator-capture')\n")
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_recorder_runs_higher_order_ops() -> None:
    import torch

    with recorder_class()() as recorder:
        x = torch.ones(3)
        out = torch.cond(x.sum() > 0, lambda a: a + 1, lambda a: a - 1, (x,))
    assert out.tolist() == [2.0, 2.0, 2.0]
    names = {op_name(f) for f in recorder.seen}
    assert {"higher_order::cond", "aten::ones", "aten::sum"} <= names


def _unfold_written() -> None:
    import torch

    t = torch.zeros(6)
    t.unfold(0, 2, 2)[0].add_(1)  # a view of a view: both calls are written through


def _real_set() -> None:
    import torch

    z = torch.zeros(3, dtype=torch.complex64)
    z.real = torch.ones(3)  # the setter copies into view_as_real's select


def _unfold_read() -> None:
    import torch

    torch.zeros(6).unfold(0, 2, 2).sum()


def _view_reshaped_in_place() -> None:
    import torch

    torch.zeros(2, 3).t().transpose_(0, 1)  # an in-place view op writes no value


def _made_complex() -> None:
    from torch.testing import make_tensor
    import torch

    make_tensor((3,), dtype=torch.complex64, device="cpu")  # filled through view_as_real


def _out_into_a_view() -> None:
    import torch

    torch.add(torch.ones(2, 2), 1, out=torch.zeros(2, 2).t())


@pytest.mark.parametrize(("body", "twins"), [
    (_unfold_written, {"writes:aten::unfold(float32)", "writes:aten::select.int(float32)"}),
    (_real_set, {"writes:aten::view_as_real(complex64)", "writes:aten::select.int(float32)"}),
    (_out_into_a_view, {"writes:aten::t(float32)"}),
    (_unfold_read, set()),
    (_view_reshaped_in_place, set()),
    (_made_complex, set()),  # make_tensor's own random fill: no value a test reads back
])
def test_the_recorder_notes_a_writing_twin_for_each_view_a_test_writes_into(body: object, twins: set[str]) -> None:
    with recorder_class()({}) as recorder:
        body()  # type: ignore[operator]
    assert {c for c in recorder.calls if c.startswith("writes:")} == twins
    for twin in twins:  # the view call's own example, for the probe to replay
        assert recorder.new[twin] == recorder.examples[twin.removeprefix("writes:")]


ZERO_TENSOR_CALL = """
import torch
from testcurator.plugin.recorder import recorder_class

with recorder_class()() as recorder:
    zero = torch._efficientzerotensor((2, 3), dtype=torch.float64)
    out = torch.ops.aten.{overload}(zero, 2)
print(out.tolist(), sorted(c for c in recorder.calls if c.startswith("aten::{overload}")))
"""


@pytest.mark.parametrize(("overload", "values"), [("mul.Scalar", 0.0), ("add.Scalar", 2.0)])
def test_an_efficient_zero_tensor_under_the_recorder_does_not_kill_the_process(overload: str, values: float) -> None:
    """gradcheck's undefined-tangent check calls these on efficient zero tangents; their
    ZeroTensor kernels segfault under any TorchDispatchMode (torch 2.13), and upstream
    test_ops_fwd_gradients' float64 forward-AD instances killed the capture's worker. In a
    child process: a segfault here must fail this test, not end the suite's worker."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", ZERO_TENSOR_CALL.format(overload=overload)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == f"{[[values] * 3] * 2} ['aten::{overload}(float64)']"


def test_capture_records_calls_with_one_replayable_example_each(captured: Path, tmp_path: Path) -> None:
    from testcurator.plugin.callspec import rebuild

    lines = read_lines(captured)
    add16 = lines["test_op_add_cpu_float16"]
    assert "aten::add.Tensor(float16,float16)" in add16["calls"]
    assert "aten::add.Tensor(float32,float32)" in lines["test_op_add_cpu_float32"]["calls"]
    assert "aten::neg(float32)" in lines["test_fails_cpu"]["calls"]
    # One example per call key in the process: the first test that made the call carries it.
    carriers = [name for name, rec in lines.items() if "aten::add.Tensor(float16,float16)" in rec["examples"]]
    assert len(carriers) == 1
    assert all(set(rec["examples"]) <= set(rec["calls"]) for rec in lines.values())

    opmap = OpMap(tmp_path / "state")
    opmap.ingest(captured)
    calls = opmap.calls()
    assert calls["aten::add.Tensor(float16,float16)"] is not None
    args, kwargs = rebuild(calls["aten::add.Tensor(float16,float16)"])
    import torch

    assert all(isinstance(a, torch.Tensor) and a.dtype == torch.float16 for a in args[:2])
    per_node = {i.nodeid.rsplit("::", 1)[1]: i.calls for i in opmap.instance_calls()}
    assert "aten::neg(float32)" in per_node["test_fails_cpu"]
    opmap.close()


def test_an_example_is_kept_only_from_a_call_that_worked() -> None:
    """A test of error handling calls flip with a repeated dim first: that call fails on CPU
    too, so its arguments would be an example the probe cannot replay; the later call that
    works gives the key its example."""
    import json

    import torch

    with recorder_class()() as recorder:
        x = torch.ones(2, 2, dtype=torch.bool)
        with pytest.raises(RuntimeError, match="appears multiple times"):
            torch.flip(x, (1, 1))
        torch.flip(x, (0,))
    assert "aten::flip(bool)" in recorder.calls
    assert json.loads(recorder.examples["aten::flip(bool)"])["args"][1] == {"list": [0]}


def test_a_call_that_only_raised_is_told_from_one_that_also_worked() -> None:
    """Upstream test_embedding_scalar_weight_error calls embedding with a 0-d weight to see it
    raise: that key only raised. flip raised once and then worked: not one the test made only
    to see it fail."""
    import torch

    with recorder_class()() as recorder:
        x = torch.ones(2, 2, dtype=torch.bool)
        with pytest.raises(RuntimeError):
            torch.flip(x, (1, 1))
        torch.flip(x, (0,))
        with pytest.raises(RuntimeError, match="must be 2-D"):
            torch.nn.functional.embedding(torch.zeros(2, dtype=torch.long), torch.tensor(1.0))
    # each raising call is noted as its raising twin too, with the raising inputs as its example
    assert _typed(recorder.raised - recorder.worked) == {"aten::embedding(float32,int64)", "raises:RuntimeError:aten::embedding(float32,int64)",
                                                         "raises:RuntimeError:aten::flip(bool)"}
    examples = {_typed({k}).pop(): json.loads(v) for k, v in recorder.examples.items()}
    assert examples["raises:RuntimeError:aten::flip(bool)"]["args"][1] == {"list": [1, 1]}
    assert examples["raises:RuntimeError:aten::embedding(float32,int64)"]["args"][0]["shape"] == []  # the 0-d weight


def _typed(keys: set[str] | tuple[str, ...]) -> set[str]:
    """Raising twins without their message's signature: ``raises:RuntimeError:aten::flip(bool)``."""
    return {re.sub(r"~[0-9a-f]{8}:", ":", k) for k in keys}


def test_one_call_raising_for_two_reasons_keeps_the_inputs_of_each() -> None:
    """Upstream test_embedding_scalar_weight_error's 0-d weight raises embedding's own
    RuntimeError (before any kernel: curatedev raises it too); another test's index out of range
    raises index_select's IndexError (in the kernel curatedev lacks). One twin for both kept the
    first test's inputs, and the probe judged the other test by them."""
    import torch

    with recorder_class()() as recorder:
        with pytest.raises(IndexError, match="index out of range"):
            torch.nn.functional.embedding(torch.tensor([5]), torch.ones(2, 3))
        with pytest.raises(RuntimeError, match="must be 2-D"):
            torch.nn.functional.embedding(torch.zeros(2, dtype=torch.long), torch.tensor(1.0))
    shapes = {_typed({k}).pop(): json.loads(v)["args"][0]["shape"] for k, v in recorder.examples.items() if k.startswith("raises:")}
    assert shapes == {"raises:IndexError:aten::embedding(float32,int64)": [2, 3],
                      "raises:RuntimeError:aten::embedding(float32,int64)": []}


def test_one_call_raising_two_errors_of_one_type_keeps_the_inputs_of_each() -> None:
    """Upstream test_view_as_complex expects view_as_complex to raise four RuntimeErrors; OpenReg
    raises some of them and not others. Each message is a twin of its own, with its own inputs;
    the same check raised again with other sizes is the same twin."""
    import torch

    with recorder_class()() as recorder:
        for last in (3, 5):  # "Tensor must have a last dimension of size 2", twice
            with pytest.raises(RuntimeError, match="size 2"):
                torch.view_as_complex(torch.ones(2, last))
        with pytest.raises(RuntimeError, match="stride 1"):
            torch.view_as_complex(torch.ones(2, 4)[:, ::2])
    twins = {k: json.loads(v)["args"][0] for k, v in recorder.examples.items() if k.startswith("raises:")}
    assert _typed(set(twins)) == {"raises:RuntimeError:aten::view_as_complex(float32)"} and len(twins) == 2
    assert sorted(t["shape"] for t in twins.values()) == [[2, 2], [2, 3]]  # the first size's inputs (not 2x5), and the stride's


def test_the_calls_that_only_raised_reach_the_op_map(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_raises='''
import torch
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase


class TestRaises(TestCase):
    def test_scalar_weight_error(self, device):
        with self.assertRaisesRegex(RuntimeError, "must be 2-D"):
            torch.nn.functional.embedding(torch.zeros(2, dtype=torch.long, device=device), torch.tensor(1.0, device=device))
        torch.ones(2, device=device).neg()


instantiate_device_type_tests(TestRaises, globals(), only_for="cpu")
''')
    out = tmp_path / "ops.jsonl"
    pytester.runpytest_inprocess("-p", "no:cacheprovider", f"--curate-capture-ops={out}").assert_outcomes(passed=1)
    opmap = OpMap(tmp_path / "ops.sqlite")
    opmap.ingest(out)
    [inst] = list(opmap.instance_calls())
    assert _typed(inst.raised) == {"aten::embedding(float32,int64)", "raises:RuntimeError:aten::embedding(float32,int64)"}
    assert set(inst.raised) < set(inst.calls) and "aten::neg(float32)" in inst.calls
    opmap.close()


def test_dlpacks_python_level_device_mapping_is_recorded_as_a_call() -> None:
    """Upstream test_dlpack's from_dlpack asks the tensor's ``__dlpack_device__``, which maps the
    device type in Python (no aten op): curatedev and OpenReg fail there, so the capture notes it
    as a call the probe can replay, with its example."""
    import torch

    recorder = recorder_class()()
    with recorder, PythonCallRecorder(recorder):
        y = torch.from_dlpack(torch.arange(3.0))
        torch.add(y, 1)
    assert {"python::Tensor.__dlpack_device__(float32)", "python::Tensor.__dlpack__(float32)",
            "aten::add.Tensor(float32)"} <= recorder.calls
    assert json.loads(recorder.examples["python::Tensor.__dlpack_device__(float32)"])["args"][0]["shape"] == [3]


def test_recording_leaves_no_torch_function_on_the_tests_tensors() -> None:
    """Upstream test_multihead_attention_fastpath_for_all_batchfirst takes MHA's fast path only
    when no tensor has a torch function: under a TorchFunctionMode it took the slow one and
    passed on CPU, while it fails on CPU and on the device without one."""
    import torch

    x, original = torch.ones(2), torch.Tensor.__dict__["__dlpack_device__"]
    recorder = recorder_class()()
    with recorder, PythonCallRecorder(recorder):
        assert not torch.overrides.has_torch_function((x,))
        torch.from_dlpack(x)
    assert torch.Tensor.__dict__["__dlpack_device__"] is original  # restored after the test
    assert "python::Tensor.__dlpack_device__(float32)" in recorder.calls


def test_each_torch_nn_forward_that_returns_is_recorded_as_a_module_call() -> None:
    """``gru_cell`` runs ``_thnn_fused_gru_cell`` on a privateuse1 device and a decomposition on
    CPU: the capture notes the module itself, with its dtype, for the probe to build and run.
    A test's own module and a container are not torch.nn's to build; a forward that raises
    (a test of the module's errors) notes nothing."""
    import torch

    class Mine(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2

    recorder = recorder_class()()
    with recorder, ModuleCallRecorder(recorder):
        torch.nn.Sequential(torch.nn.Linear(3, 2).double(), Mine())(torch.ones(1, 3, dtype=torch.float64))
        torch.nn.ReLU()(torch.ones(2, dtype=torch.bfloat16))
        with pytest.raises(RuntimeError):
            torch.nn.GRUCell(3, 2)(torch.ones(1, 5))
    modules = {c for c in recorder.calls if c.startswith("module::")}
    assert modules == {"module::nn.Linear(float64)", "module::nn.ReLU(bfloat16)"}
    assert json.loads(recorder.examples["module::nn.Linear(float64)"]) == {"module": "nn.Linear", "dtype": "float64"}
    assert "aten::addmm(float64,float64,float64)" in recorder.calls
    assert not torch.nn.modules.module._global_forward_hooks  # the hook goes with the test


def test_a_call_on_a_sparse_tensor_is_named_in_the_records_layouts(pytester: pytest.Pytester) -> None:
    # Read in the capturing process, which has the op's schema: the run's driver, which
    # reads the record, imports no torch (core/installed.py).
    pytester.makepyfile(test_sparse='''
import torch
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase


class TestLayouts(TestCase):
    def test_sparse(self, device):
        s = torch.sparse_coo_tensor(torch.tensor([[0, 1]]), torch.ones(2), (3,), device=device).coalesce()
        self.assertEqual(s._indices().tolist(), [[0, 1]])

    def test_dense(self, device):
        torch.nn.functional.embedding(torch.tensor([0]), torch.ones(2, 2, device=device), sparse=True)


instantiate_device_type_tests(TestLayouts, globals(), only_for="cpu")
''')
    result = pytester.runpytest_inprocess("--curate-capture-ops", "caps/ops.jsonl", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    lines = read_lines(pytester.path / "caps" / "ops.jsonl")
    assert "aten::_indices[sparse_coo]" in lines["test_sparse_cpu"]["layouts"]
    assert "layouts" not in lines["test_dense_cpu"]  # embedding's own sparse flag marks no layout
