"""The classifier on failure texts produced by real torch code, run here and now."""

from __future__ import annotations

import socket
import traceback
import unittest
from collections.abc import Callable

import pytest
import torch

from testcurator.runner.results.classify import classify, focus_text
from testcurator.vocab import FAILURE_CLASSES, MEMORY_LIMIT_LINE


def _raise_text(fn: Callable[[], object]) -> str:
    """The formatted traceback a real call raises (what unittest/run_test.py reports)."""
    try:
        fn()
    except Exception:
        return traceback.format_exc()
    raise AssertionError("expected the call to raise")


def _sparse_zeta() -> object:
    s = torch.eye(3).to_sparse()
    return torch.special.zeta(s, s)


def _bind_twice() -> object:
    with socket.socket() as a, socket.socket() as b:
        a.bind(("127.0.0.1", 0))
        a.listen()
        b.bind(a.getsockname())
    return None


def _source_mentions_op() -> object:
    # The source line below quotes a missing-kernel message; the error is a ValueError.
    raise ValueError("bad argument")  # "Could not run 'aten::add.out' with arguments from the 'X' backend"


CASES: list[tuple[str, Callable[[], object], str, dict[str, str | None], tuple[str, ...]]] = [
    # id, real failing call, expected class, expected named fields, evidence must contain
    ("assert_close", lambda: torch.testing.assert_close(torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([1.0, 2.5, 3.5, 4.5])),
     "numerical_mismatch", {}, ("Mismatched elements: 3 / 4 (75.0%)", "Greatest absolute difference: 0.5", "Greatest relative difference")),
    ("scalar_close", lambda: torch.testing.assert_close(torch.tensor(1.0), torch.tensor(1.5)),
     "numerical_mismatch", {}, ("Absolute difference: 0.5",)),
    ("dtype_attr", lambda: torch.testing.assert_close(torch.ones(2), torch.ones(2, dtype=torch.int64)),
     "numerical_mismatch", {}, ("The values for attribute 'dtype' do not match",)),
    ("sparse_kernel", _sparse_zeta,
     "unsupported_op", {"op": "aten::special_zeta"}, ("Could not run 'aten::special_zeta' with arguments from the 'SparseCPU' backend",)),
    ("overrideable_stub", lambda: torch.ops.aten.convolution_overrideable(torch.ones(1, 1, 3), torch.ones(1, 1, 1), None,
                                                                            [1], [0], [1], False, [0], 1),
     "unsupported_op", {"op": "aten::convolution_overrideable"}, ("convolution_overrideable not implemented",)),
    ("half_kernel", lambda: torch.linalg.cholesky(torch.eye(3, dtype=torch.float16)),
     "unsupported_dtype", {"dtype": "float16"}, ("not implemented for 'Half'",)),
    ("bool_neg", lambda: torch.ones(2, dtype=torch.bool).neg(),
     "unsupported_dtype", {"dtype": "bool"}, ("on a bool tensor is not supported",)),
    ("int_inv", lambda: torch.linalg.inv(torch.ones(3, 3, dtype=torch.int64)),
     "unsupported_dtype", {"dtype": "int64"}, ("Expected a floating point or complex tensor as input. Got Long",)),
    ("complex_ceil", lambda: torch.ones(2, dtype=torch.complex64).ceil(),
     "unsupported_dtype", {}, ("ceil is not supported for complex inputs",)),
    ("address_in_use", _bind_twice, "transient", {}, ("Address already in use",)),
    ("missing_attr", lambda: torch.nn.functional.no_such_function(torch.ones(1)),
     "test_error", {}, ("AttributeError: module 'torch.nn.functional' has no attribute 'no_such_function'",)),
    ("bad_signature", lambda: torch.testing.assert_close(torch.ones(1)),
     "test_error", {}, ("missing 1 required positional argument",)),
    ("bad_view", lambda: torch.ones(2).view(3), "unknown", {}, ("RuntimeError: shape '[3]' is invalid for input of size 2",)),
    ("quoted_source", _source_mentions_op, "unknown", {}, ("ValueError: bad argument",)),
]


@pytest.mark.parametrize(("call", "expected", "named", "needles"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_real_texts(call: Callable[[], object], expected: str, named: dict[str, str | None], needles: tuple[str, ...]) -> None:
    result = classify(_raise_text(call))
    assert result.failure_class == expected, result
    for needle in needles:
        assert needle in result.evidence
    for key, value in named.items():
        assert getattr(result, key) == value


@pytest.fixture(scope="module")
def opinfo_failures() -> dict[str, str]:
    """Failures raised inside real OpInfo tests (torch appends its repro message).

    The "Caused by sample input" re-raise as a plain Exception is covered through a real
    pytest run in test_junit.py.
    """
    from torch.testing._internal.common_device_type import instantiate_device_type_tests, ops
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.common_utils import TestCase

    chosen = [o for o in op_db if o.name == "neg"]

    class TestWrapped(TestCase):
        @ops(chosen, allowed_dtypes=(torch.float32,))
        def test_mismatch(self, device: str, dtype: torch.dtype, op: object) -> None:
            for sample in op.sample_inputs(device, dtype):  # type: ignore[attr-defined]
                out = op(sample.input)  # type: ignore[operator]
                self.assertEqual(out, out + 1)

        @ops(chosen, allowed_dtypes=(torch.float32,))
        def test_kernel(self, device: str, dtype: torch.dtype, op: object) -> None:
            for sample in op.sample_inputs(device, dtype):  # type: ignore[attr-defined]
                sparse = sample.input.to_sparse()
                torch.special.zeta(sparse, sparse)

    scope: dict[str, object] = {"__name__": __name__, "TestWrapped": TestWrapped}
    instantiate_device_type_tests(TestWrapped, scope, only_for="cpu")
    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(scope["TestWrappedCPU"]).run(result)  # type: ignore[arg-type]
    return {test.id().rsplit(".", 1)[-1]: text for test, text in result.errors + result.failures}


@pytest.mark.parametrize(("name", "expected", "needle"), [
    ("test_mismatch_neg_cpu_float32", "numerical_mismatch", "Mismatched elements: "),
    ("test_kernel_neg_cpu_float32", "unsupported_op", "Could not run 'aten::special_zeta'"),
])
def test_through_opinfo_wrapper(opinfo_failures: dict[str, str], name: str, expected: str, needle: str) -> None:
    text = opinfo_failures[name]
    assert "PYTORCH_PRINT_REPRO_ON_FAILURE" in text  # torch's repro wrapper was in the way
    result = classify(text)
    assert (result.failure_class, needle in result.evidence) == (expected, True), result


@pytest.mark.parametrize(("returncode", "outcome", "expected", "signal"), [
    (-9, "crashed", "crash", "SIGKILL"),
    (-11, None, "crash", "SIGSEGV"),
    (3, "crashed", "crash", None),
    (None, "timeout", "timeout", None),
])
def test_runner_context(returncode: int | None, outcome: str | None, expected: str, signal: str | None) -> None:
    result = classify("", outcome=outcome, returncode=returncode)
    assert (result.failure_class, result.signal) == (expected, signal)


def test_focus_prefers_pytest_error_lines() -> None:
    text = "    def test():\n>       raise_it()\nE       RuntimeError: boom\n\nx.py:2: RuntimeError"
    assert focus_text(text) == "RuntimeError: boom"


@pytest.mark.parametrize(("text", "expected"), [
    (f"{MEMORY_LIMIT_LINE} (it may add 128 MB to what its process held when it started; --curate-memory-limit)\n"
     "Traceback (most recent call last):\nRuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: "
     "can't allocate memory: you tried to allocate 536870912 bytes. Error code 12 (Cannot allocate memory)",
     "memory_limit"),
    # The same allocation without the plugin's line: the machine's state, not the test's need.
    ("RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes. Error code 12 "
     "(Cannot allocate memory)", "transient"),
])
def test_an_allocation_under_the_runs_memory_limit_is_the_tests_own(text: str, expected: str) -> None:
    result = classify(text)
    assert result.failure_class == expected
    if expected == "memory_limit":
        assert result.evidence.startswith(MEMORY_LIMIT_LINE) and "you tried to allocate 536870912 bytes" in result.evidence


def test_every_class_is_reachable() -> None:
    reached = {c[2] for c in CASES} | {"crash", "timeout", "unexpected_pass", "memory_limit"}  # test_execute.py
    assert reached == set(FAILURE_CLASSES)
