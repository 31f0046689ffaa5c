# Example upstream-style test file for testcurator, written in PyTorch's test conventions
# (@ops over OpInfos from the real op_db, instantiate_device_type_tests). Not copied from
# PyTorch. It covers a deliberately small slice of op_db so the example stays fast.
from __future__ import annotations

import torch
from torch.testing._internal.common_device_type import (
    instantiate_device_type_tests,
    onlyCUDA,
    OpDTypes,
    ops,
)
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import run_tests, TestCase

# (OpInfo name, variant_test_name) of the slice; the example config names these ops.
OP_SLICE = (
    ("add", ""),
    ("sub", ""),
    ("mul", ""),
    ("div", "no_rounding_mode"),
    ("abs", ""),
    ("neg", ""),
    ("exp", ""),
    ("sum", ""),
    ("matmul", ""),
    ("nn.functional.relu", ""),
    ("linalg.det", ""),
    ("clone", ""),
    ("where", ""),
    ("cat", ""),
    ("maximum", ""),
)
slice_ops = [op for op in op_db if (op.name, op.variant_test_name) in OP_SLICE]
ref_ops = [op for op in slice_ops if op.ref is not None]
out_ops = [op for op in slice_ops if op.supports_out]

COMPARE_DTYPES = (
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.float16, torch.float32, torch.float64, torch.complex64,
)
REF_DTYPES = (torch.int64, torch.float64, torch.complex128)
CLAIM_DTYPES = (torch.bool, torch.int64, torch.float32)


def _to_cpu(x):
    return x.detach().cpu() if isinstance(x, torch.Tensor) else x


class TestCommon(TestCase):
    @ops(slice_ops, allowed_dtypes=COMPARE_DTYPES)
    def test_compare_cpu(self, device, dtype, op):
        # The device result must match the CPU result of the same samples (on CPU this
        # checks determinism; on an accelerator it is the main correctness signal).
        for sample in op.sample_inputs(device, dtype):
            actual = op(sample.input, *sample.args, **sample.kwargs)
            cpu = sample.transform(_to_cpu)
            expected = op(cpu.input, *cpu.args, **cpu.kwargs)
            self.assertEqual(_to_cpu(actual), expected)

    @ops(ref_ops, allowed_dtypes=REF_DTYPES)
    def test_numpy_reference(self, device, dtype, op):
        for sample in op.sample_inputs(device, dtype):
            actual = op(sample.input, *sample.args, **sample.kwargs)
            np_sample = sample.numpy()
            expected = op.ref(np_sample.input, *np_sample.args, **np_sample.kwargs)
            # numpy promotes differently (e.g. int64 exp -> float64), so values only.
            self.assertEqual(actual, expected, exact_dtype=False)

    @ops(out_ops, allowed_dtypes=(torch.float32,))
    def test_out_argument(self, device, dtype, op):
        sample = next(iter(op.sample_inputs(device, dtype)))
        expected = op(sample.input, *sample.args, **sample.kwargs)
        out = torch.empty_like(expected)
        returned = op(sample.input, *sample.args, **sample.kwargs, out=out)
        self.assertIs(returned, out)
        self.assertEqual(out, expected)

    @ops(slice_ops, dtypes=OpDTypes.none)
    def test_supported_dtypes_run(self, device, op):
        # Every dtype the OpInfo claims (within a small set) must actually run.
        claimed = op.supported_dtypes(torch.device(device).type)
        ran = []
        for dtype in CLAIM_DTYPES:
            if dtype not in claimed:
                continue
            sample = next(iter(op.sample_inputs(device, dtype)))
            result = op(sample.input, *sample.args, **sample.kwargs)
            self.assertIsInstance(result, torch.Tensor)
            ran.append(dtype)
        self.assertTrue(ran, f"{op.name} claims none of {CLAIM_DTYPES}")

    @onlyCUDA
    @ops(slice_ops, allowed_dtypes=(torch.float32,))
    def test_pinned_input(self, device, dtype, op):
        sample = next(iter(op.sample_inputs("cpu", dtype)))
        pinned = sample.transform(
            lambda x: x.pin_memory() if isinstance(x, torch.Tensor) else x
        )
        moved = pinned.transform(
            lambda x: x.to(device, non_blocking=True) if isinstance(x, torch.Tensor) else x
        )
        result = op(moved.input, *moved.args, **moved.kwargs)
        self.assertEqual(result.cpu(), op(sample.input, *sample.args, **sample.kwargs))


instantiate_device_type_tests(TestCommon, globals())

if __name__ == "__main__":
    run_tests()
