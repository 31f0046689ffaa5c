"""The probe: captured calls replayed on a real device backend, a subprocess per batch.

The device is the curatedev example backend, whose fallback runs only the ops on its
allowlist (a backend that covers only some ops), and a variant of it with kernels that
abort, hang and compute wrong results (tests/runner/crashdev). Every worker imports the
backend in its own process: registering the device must not leak into this one.
"""

from __future__ import annotations

import json
import os
from collections import deque
from pathlib import Path
from typing import Any

import pytest
import torch

from testcurator.errors import ExecutionError
from testcurator.plugin.callspec import call_key, example, raise_call, rebuild, write_call
from testcurator.runner.probe.replay import ProbeSpec, BatchQueue, probe_calls
from testcurator.runner.probe.replay_worker import cpu_steady, same_error

ROOT = Path(__file__).resolve().parents[3]
BACKEND_DIR = ROOT / "examples" / "backend"
CRASHDEV = Path(__file__).resolve().parents[1] / "crashdev"


def _call(op: str, *args: object, **kwargs: object) -> tuple[str, str | None]:
    return call_key(op, args, kwargs), example(args, kwargs)


def _spec(backend: str | None, paths: list[Path], **kw: object) -> ProbeSpec:
    env = {"PYTHONPATH": os.pathsep.join(map(str, paths)), "PYTORCH_PRINT_REPRO_ON_FAILURE": "0"}
    return ProbeSpec(device="curatedev", backend=backend, env=env, cwd=BACKEND_DIR, **kw)


def test_partial_fallback_backend_is_probed_per_op_and_dtype() -> None:
    x = torch.randn(4, 3)
    calls = dict([
        _call("aten::add.Tensor", x, x),  # on the allowlist
        _call("aten::add.Tensor", x.double(), x.double()),  # float64 is not an allowed dtype
        _call("aten::sort.values_stable", x, stable=True, dim=0, descending=False,
              values=torch.empty(4, 3), indices=torch.empty(4, 3, dtype=torch.long)),  # not on the allowlist
        _call("aten::index_select", x, 0, torch.tensor([3, 0])),  # integer indices keep their values
        _call("aten::mul.Tensor", x.t(), x.t()),  # non-contiguous inputs keep their strides
        ("aten::add.Tensor(bogus)", None),  # no example: not probed
    ])
    results = {r.call: r for r in probe_calls(calls, _spec("curatedev.testing:setup_device_type_tests",
                                                           [BACKEND_DIR]))}
    assert {k: r.status for k, r in results.items()} == {
        "aten::add.Tensor(float32,float32)": "works",
        "aten::add.Tensor(float64,float64)": "unsupported_dtype",
        "aten::sort.values_stable(float32,int64,float32)": "missing_kernel",
        "aten::index_select(float32,int64)": "missing_kernel",
        "aten::mul.Tensor(float32,float32)": "works",
        "aten::add.Tensor(bogus)": "not_probed",
    }
    assert "Double" in results["aten::add.Tensor(float64,float64)"].error
    assert "aten::sort.values_stable" in results["aten::sort.values_stable(float32,int64,float32)"].error


@pytest.mark.slow
def test_crashing_and_hanging_kernels_are_contained_and_the_batch_goes_on() -> None:
    x = torch.randn(5)
    calls = dict([
        _call("aten::flip", x, [0]),  # aborts the worker
        _call("aten::roll", x, [1], [0]),  # hangs the worker
        _call("aten::neg", x),  # wrong result
        _call("aten::add.Tensor", x, x),
        _call("aten::abs", x),
        _call("aten::exp", x),
    ])
    # Two worker processes at once: the crash in one puts the calls it did not reach back.
    spec = _spec("crashdev_backend:setup", [CRASHDEV, BACKEND_DIR], call_timeout=5.0, batch=3, workers=2)
    results = {r.call: r for r in probe_calls(calls, spec)}
    assert len(results) == len(calls)
    assert results["aten::flip(float32)"].status == "crash"
    assert "SIGABRT" in results["aten::flip(float32)"].error
    assert results["aten::roll(float32)"].status == "crash"
    assert results["aten::roll(float32)"].error.startswith("hang")
    assert results["aten::neg(float32)"].status == "wrong_result"
    assert "not close" in results["aten::neg(float32)"].error
    # The calls after the crash and the hang, in the same batches, still ran.
    assert {results[k].status for k in ("aten::add.Tensor(float32,float32)", "aten::abs(float32)",
                                         "aten::exp(float32)")} == {"works"}


def test_batches_are_handed_out_in_order_and_what_a_crash_left_comes_back_first() -> None:
    calls = [(f"c{i}", "x") for i in range(5)]
    queue = BatchQueue(deque(calls), size=2)
    assert queue.take() == (1, calls[0:2])
    assert queue.take() == (2, calls[2:4])
    queue.put_back([calls[1]])  # batch 1 crashed on c0: c1 was not reached
    assert queue.take() == (3, [calls[1], calls[4]])
    queue.put_back([])
    queue.put_back([])
    assert queue.take() is None  # nothing left and no batch out


def test_a_failed_worker_stops_the_others_after_their_batch() -> None:
    queue = BatchQueue(deque([("c0", "x"), ("c1", "x")]), size=1)
    assert queue.take() == (1, [("c0", "x")])
    queue.fail()
    assert queue.take() is None


def test_a_backend_that_does_not_import_is_a_setup_error_not_a_finding() -> None:
    x = torch.randn(2)
    with pytest.raises(ExecutionError, match="did not start"):
        probe_calls(dict([_call("aten::abs", x)]), _spec("no_such_backend_module:setup", [BACKEND_DIR]))


def _storage_and_pin_calls() -> dict[str, str | None]:
    storage = torch.zeros(12, dtype=torch.uint8).untyped_storage()
    return dict([
        # copy.deepcopy / a storage's copy_ (torch.save's storage.cpu()) of a device tensor
        _call("aten::set_.source_Storage", torch.empty(0, dtype=torch.uint8), storage),
        # torch.load and deepcopy rebuilding a tensor on its storage
        _call("aten::set_.source_Storage_storage_offset", torch.empty(0), storage, 0, [3], [1]),
        # tensor.pin_memory(): a host call, through the process's accelerator
        _call("aten::is_pinned", torch.ones(3)),
        _call("aten::_pin_memory", torch.ones(3)),
    ])


SET, SET_AT = "aten::set_.source_Storage(uint8)", "aten::set_.source_Storage_storage_offset(float32)"
IS_PINNED, PIN = "aten::is_pinned(float32)", "aten::_pin_memory(float32)"
# backend module, device -> the status of each call: curatedev's fallback runs set_ on CPU,
# which cannot hold a device storage, and it has no pinned host allocator; a device whose
# storages and pinning work (CPU itself for storages, curatedev with host pinning) passes.
STORAGE_AND_PIN = [
    ("curatedev.testing:setup_device_type_tests", "curatedev",
     {SET: "error", SET_AT: "error", IS_PINNED: "works", PIN: "error"}),
    ("pinhost_backend:setup", "curatedev", {SET: "error", SET_AT: "error", IS_PINNED: "works", PIN: "works"}),
    (None, "cpu", {SET: "works", SET_AT: "works"}),
]


@pytest.mark.parametrize("backend,device,expected", STORAGE_AND_PIN, ids=["curatedev", "pinning backend", "cpu"])
@pytest.mark.slow
def test_storage_moves_and_pinning_are_probed_where_they_happen(backend: str | None, device: str,
                                                               expected: dict[str, str]) -> None:
    calls = {k: v for k, v in _storage_and_pin_calls().items() if k in expected}
    assert all(calls.values())  # every one has a replayable example
    spec = ProbeSpec(device=device, backend=backend, cwd=BACKEND_DIR,
                     env={"PYTHONPATH": os.pathsep.join(map(str, (CRASHDEV, BACKEND_DIR)))})
    results = {r.call: r for r in probe_calls(calls, spec)}
    assert {k: r.status for k, r in results.items()} == expected
    if expected[SET] == "error":
        assert "storage" in results[SET].error
    if expected.get(PIN) == "error":
        assert "PrivateUse1HooksInterface" in results[PIN].error


@pytest.mark.parametrize("backend,device,status", [
    ("curatedev.testing:setup_device_type_tests", "curatedev", "error"), (None, "cpu", "works")])
def test_a_python_level_tensor_method_is_replayed_on_the_device(backend: str | None, device: str, status: str) -> None:
    # DLPack maps the device type in Python: a privateuse1 device is unknown to it.
    key = "python::Tensor.__dlpack_device__(float32)"
    calls = {key: example((torch.arange(3.0),), {})}
    [result] = probe_calls(calls, ProbeSpec(device=device, backend=backend, cwd=BACKEND_DIR,
                                            env={"PYTHONPATH": str(BACKEND_DIR)}))
    assert (result.call, result.status) == (key, status)
    if status == "error":
        assert "Unknown device type curatedev for Dlpack" in result.error


def test_a_raising_call_is_replayed_for_the_same_error_on_the_device() -> None:
    # Upstream test_polygamma_neg: polygamma checks n before its kernel, which curatedev lacks,
    # so the device raises CPU's very error; index_select's bound check is in the kernel itself.
    x = torch.tensor([1.0, 2.0])
    cases = {raise_call("aten::polygamma(float32)", "RuntimeError"): ((-1, x), "works"),
             raise_call("aten::index_select(float32,int64)", "IndexError"): ((x, 0, torch.tensor([5])), "missing_kernel"),
             # it does not raise on CPU: nothing to compare
             raise_call("aten::neg(float32)", "RuntimeError"): ((x,), "not_probed"),
             # upstream test_broadcast_to: the message names the device's tensor type
             # (curatedevFloatType{...} where CPU says torch.FloatTensor{...}), nothing else differs
             raise_call("aten::expand(float32)", "RuntimeError"): ((torch.empty(5, 1, 2, 3), [1, 2, 3]), "works")}
    calls = {key: example(args, {}) for key, (args, _) in cases.items()}
    results = {r.call: r for r in probe_calls(calls, _spec("curatedev.testing:setup_device_type_tests", [BACKEND_DIR]))}
    assert {k: r.status for k, r in results.items()} == {k: status for k, (_, status) in cases.items()}
    assert "did not raise" in results[raise_call("aten::neg(float32)", "RuntimeError")].error


def test_a_writing_twin_works_where_the_devices_view_shares_its_inputs_memory() -> None:
    # curatedev's views are views; OpenReg's unfold is a copy (tests/examples/test_openreg.py).
    x, z = torch.arange(8.0), torch.zeros(3, dtype=torch.complex64)
    cases = {write_call("aten::view_as_real(complex64)"): ((z,), "works"),
             write_call("aten::select.int(float32)"): ((x, 0, 1), "works"),
             # no kernel on curatedev: the call's own replay says so, not its twin
             write_call("aten::unfold(float32)"): ((x, 0, 2, 2), "not_probed"),
             write_call("aten::neg(float32)"): ((x,), "not_probed")}  # no view op
    calls = {key: example(args, {}) for key, (args, _) in cases.items()}
    results = {r.call: r for r in probe_calls(calls, _spec("curatedev.testing:setup_device_type_tests", [BACKEND_DIR]))}
    assert {k: r.status for k, r in results.items()} == {k: status for k, (_, status) in cases.items()}
    assert "own replay" in results[write_call("aten::unfold(float32)")].error


@pytest.mark.parametrize(("device_error", "same"), [
    (RuntimeError("expand(openregFloatType{[5, 1]}, size=[1]): too few sizes"), True),
    (RuntimeError("expand(torch.openreg.FloatTensor{[5, 1]}, size=[1]): too few sizes"), True),
    (RuntimeError("expand(openregFloatType{[5, 1]}, size=[2]): too few sizes"), False),  # another message
    (ValueError("expand(torch.FloatTensor{[5, 1]}, size=[1]): too few sizes"), False),  # another type
])
def test_a_raising_twin_matches_cpus_error_but_for_tensor_type_names(device_error: Exception, same: bool) -> None:
    assert same_error(device_error, RuntimeError("expand(torch.FloatTensor{[5, 1]}, size=[1]): too few sizes")) is same


MODULE_CASES = {
    "nn.GRUCell": "missing_kernel",  # _thnn_fused_gru_cell: chosen on the device, never on CPU
    "nn.Linear": "works",  # addmm is on curatedev's allowlist
    "nn.LeakyReLU": "not_probed",  # leaky_relu is missing, but CPU's run calls it: its own calls decide
    "nn.Sequential": "not_probed",  # module_db has no ModuleInfo to build it from
}


@pytest.mark.slow
def test_a_module_call_is_built_from_its_moduleinfo_and_run_on_the_device() -> None:
    # One batch (one replay process, which imports module_db once): each call's status is its own.
    calls = {f"module::{module}(float32)": json.dumps({"module": module, "dtype": "float32"}) for module in MODULE_CASES}
    results = {r.call: r for r in probe_calls(calls, _spec("curatedev.testing:setup_device_type_tests", [BACKEND_DIR]))}
    assert {k: r.status for k, r in results.items()} == {f"module::{m}(float32)": s for m, s in MODULE_CASES.items()}, \
        {k: r.error for k, r in results.items()}
    assert "aten::_thnn_fused_gru_cell" in results["module::nn.GRUCell(float32)"].error
    assert "CPU's run calls it too" in results["module::nn.LeakyReLU(float32)"].error


def test_a_sparse_call_is_replayed_with_sparse_inputs_apart_from_the_dense_one() -> None:
    # OpenReg's and curatedev's sparse dispatch keys have no kernels: moving the input fails there.
    sparse = torch.sparse_coo_tensor(torch.tensor([[0, 1]]), torch.ones(2), (3,))
    calls = dict([_call("aten::clone", sparse), _call("aten::clone", torch.ones(3))])
    results = {r.call: r for r in probe_calls(calls, _spec("curatedev.testing:setup_device_type_tests", [BACKEND_DIR]))}
    assert {k: r.status for k, r in results.items()} == {"aten::clone[sparse_coo](float32)": "missing_kernel",
                                                        "aten::clone(float32)": "works"}
    assert "Sparsecuratedev" in results["aten::clone[sparse_coo](float32)"].error


@pytest.mark.parametrize(("func", "steady"), [
    (torch.ops.aten.neg.default, True),
    # a kernel that reads memory its inputs leave unset gives CPU another answer each time
    (lambda t: torch.rand(t.shape), False),
    (lambda t: torch.ones(3) if t.sum() < 0 else None, False),  # the second replay gives no tensor at all
])
def test_a_mismatch_is_the_devices_only_where_cpu_gives_its_result_again(func: Any, steady: bool) -> None:
    text = example((torch.ones(2, 3),), {})
    assert text is not None
    want = [torch.neg(rebuild(text)[0][0])] if steady else [torch.rand(2, 3)]  # the example's values, rebuilt
    assert cpu_steady(func, text, want) is steady
