# Example upstream-style test file for testcurator, written in PyTorch's test conventions
# (@modules over ModuleInfos from the real module_db). Not copied from PyTorch.
from __future__ import annotations

import io

import torch
from torch.testing._internal.common_device_type import (
    instantiate_device_type_tests,
    onlyCUDA,
)
from torch.testing._internal.common_modules import module_db, modules
from torch.testing._internal.common_utils import run_tests, TestCase

# The ModuleInfo slice; the example config excludes one of these with a modules edit.
MODULE_SLICE = ("nn.Linear", "nn.ReLU", "nn.Tanh", "nn.LayerNorm")
slice_modules = [m for m in module_db if m.name in MODULE_SLICE]


def _build(module_info, module_input, device, dtype, training):
    args, kwargs = module_input.constructor_input.args, module_input.constructor_input.kwargs
    m = module_info.module_cls(*args, **kwargs).to(device=device, dtype=dtype)
    m.train(training)
    return m


def _inputs(module_info, device, dtype, training):
    return module_info.module_inputs_func(
        module_info, device=device, dtype=dtype, requires_grad=False, training=training
    )


class TestModule(TestCase):
    @modules(slice_modules)
    def test_forward(self, device, dtype, module_info, training):
        for module_input in _inputs(module_info, device, dtype, training):
            if module_input.forward_input is None:
                continue
            m = _build(module_info, module_input, device, dtype, training)
            fw = module_input.forward_input
            out = m(*fw.args, **fw.kwargs)
            self.assertEqual(out.dtype, dtype)
            self.assertEqual(out.device.type, torch.device(device).type)
            if module_input.reference_fn is not None:
                expected = module_input.reference_fn(m, *fw.args, **fw.kwargs)
                self.assertEqual(out, expected)

    @modules(slice_modules)
    def test_repr(self, device, dtype, module_info, training):
        for module_input in _inputs(module_info, device, dtype, training):
            m = _build(module_info, module_input, device, dtype, training)
            self.assertIn(module_info.module_cls.__name__, repr(m))

    @modules(slice_modules)
    def test_state_dict_roundtrip(self, device, dtype, module_info, training):
        for module_input in _inputs(module_info, device, dtype, training):
            if module_input.forward_input is None:
                continue
            m = _build(module_info, module_input, device, dtype, training)
            buf = io.BytesIO()
            torch.save(m.state_dict(), buf)
            buf.seek(0)
            fresh = _build(module_info, module_input, device, dtype, training)
            fresh.load_state_dict(torch.load(buf))
            fw = module_input.forward_input
            self.assertEqual(fresh(*fw.args, **fw.kwargs), m(*fw.args, **fw.kwargs))

    @onlyCUDA
    @modules(slice_modules, allowed_dtypes=(torch.float32,))
    def test_cpu_gpu_parity(self, device, dtype, module_info, training):
        for module_input in _inputs(module_info, "cpu", dtype, training):
            if module_input.forward_input is None:
                continue
            cpu_m = _build(module_info, module_input, "cpu", dtype, training)
            gpu_m = _build(module_info, module_input, device, dtype, training)
            gpu_m.load_state_dict(cpu_m.state_dict())
            fw = module_input.forward_input
            gpu_args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in fw.args]
            self.assertEqual(gpu_m(*gpu_args, **fw.kwargs).cpu(), cpu_m(*fw.args, **fw.kwargs))


instantiate_device_type_tests(TestModule, globals())

if __name__ == "__main__":
    run_tests()
