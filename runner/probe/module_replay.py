"""Replaying a module call (``module::nn.GRUCell(float64)``, plugin/callspec.MODULE_NAMESPACE).

The capture notes which torch.nn modules a test ran forward, not how it built them. The probe
builds each from the first sample of its ModuleInfo in torch's own ``module_db`` (the samples
upstream test_modules runs), runs it forward on CPU, then builds it again from the same sample
with its tensors on the device and runs that.

What it is for: the ops a composite chooses on the device that CPU never calls
(``gru_cell`` takes ``_thnn_fused_gru_cell`` on a privateuse1 device; ``convolution`` takes
``convolution_overrideable``). A device failure in an op the CPU run called too is left to that
op's own call, which the probe replays from the test's own inputs: the module's sample is not
the test's.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from testcurator.plugin.callspec import MODULE_NAMESPACE, split_key, to_device
from testcurator.runner.results.classify import classify


@lru_cache(maxsize=1)
def _module_db() -> dict[str, Any]:
    from torch.testing._internal.common_modules import module_db

    out: dict[str, Any] = {}
    for info in module_db:
        out.setdefault(info.name, info)
    return out


def module_info(key: str) -> Any:
    """The ModuleInfo a module call names, or None when module_db has none for it."""
    return _module_db().get(split_key(key)[0].removeprefix(MODULE_NAMESPACE))


def sample(info: Any, example: str) -> tuple[Any, Any]:
    """(dtype, the first ModuleInput of ``info``'s samples, built on CPU, seeded)."""
    import torch

    dtype = getattr(torch, json.loads(example).get("dtype") or "float32")
    torch.manual_seed(0)
    inputs = info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=False, training=True)
    if not inputs:
        raise LookupError(f"{info.name} has no sample in {dtype}")
    return dtype, inputs[0]


def run(info: Any, dtype: Any, module_input: Any, device: str) -> set[str]:
    """Build the module from ``module_input`` with its tensors on ``device`` and run it forward;
    the names of the aten ops it dispatched (``aten::addmm``)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    ops: set[str] = set()

    class _Ops(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            ops.add(func._schema.name)
            return func(*args, **(kwargs or {}))

    ctor, forward = module_input.constructor_input, module_input.forward_input
    module = info.module_cls(*to_device(ctor.args, device), **to_device(ctor.kwargs, device))
    module = module.to(device=device, dtype=dtype)
    with _Ops():
        module(*to_device(forward.args, device), **to_device(forward.kwargs, device))
    return ops


def deferred(error: str, cpu_ops: set[str]) -> bool:
    """Whether the device's ``error`` is a missing kernel or dtype of an op CPU's run called too:
    that op's own calls, replayed from the test's inputs, decide; the module's sample says nothing
    more (and may use an op the test does not)."""
    found = classify(error)
    if found.failure_class == "unsupported_dtype":
        return True
    return found.failure_class == "unsupported_op" and _base(found.op or "") in {_base(op) for op in cpu_ops}


def _base(op: str) -> str:
    """``aten::clamp_min.out`` and ``aten::clamp_min_`` -> ``aten::clamp_min``: a backend's missing
    kernel may name another overload or the in-place variant of the op CPU ran."""
    return op.partition(".")[0].rstrip("_")

