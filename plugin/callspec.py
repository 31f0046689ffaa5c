"""Replayable aten calls: a call's key, a small JSON example of its arguments, and the call
rebuilt from that example with fresh tensors.

The op capture (plugin/capture.py) notes, per distinct *call key* (op overload and the
dtypes of its tensor arguments, ``aten::sort.values_stable(float32,float32,int64)``), one
example of the arguments: every tensor's dtype, shape, strides (values only for small
integer and bool tensors, where they are indices or masks that must stay in range), and the
scalars, dtypes, devices, layouts and memory formats as they were; a storage argument (``set_``
rebuilding a tensor in ``torch.load`` or ``copy.deepcopy``, a storage's ``copy_``) by its byte
size. The probe
(runner/probe/replay_worker.py) rebuilds the call from it with fresh values, once on CPU and once
on the device, from the same inputs.

A sparse COO tensor is noted by its indices (values kept, as for any index tensor), its values
and its size, and rebuilt as one on CPU; moved to the device, it needs the device's sparse kernels
(upstream embedding_bag's ``sparse=True`` gradient is read with ``_indices``/``_values``, which a
device without sparse COO tensors cannot run).

Bounded: a call whose arguments hold something else (a generator, a quantized or compressed
sparse tensor, a tensor over :data:`MAX_NUMEL` elements) gets no example (the probe reports it
``not_probed``), and an example longer than :data:`MAX_CHARS` is dropped the same way.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

MAX_NUMEL = 1 << 20  # elements per tensor: the probe allocates each on the device
MAX_VALUES = 256  # integer/bool tensors up to this size keep their values (indices, masks)
MAX_CHARS = 8192  # one example, as JSON
# Host-side calls that use the process's accelerator: pinning allocates through the current
# accelerator's host allocator, so a CPU tensor's ``pin_memory()`` works or fails by the backend
# loaded in the process. The probe replays them with their tensors on the host (not moved to the
# device), and judges them for every test, not only device-generic ones: a plain test that pins
# memory runs them with the backend loaded too.
HOST_CALLS = frozenset({"aten::_pin_memory", "aten::is_pinned", "aten::pin_memory"})

# Tensor methods that branch on the device's type in Python and reach no dispatcher op, so no
# aten call shows their gap: DLPack's device mapping knows cpu, cuda, xpu..., and upstream
# test_dlpack's from_dlpack fails on a privateuse1 device with "Unknown device type ... for
# Dlpack". The capture notes them (wrapped on torch.Tensor) as ``python::Tensor.<name>`` calls,
# which the probe replays as it does aten calls.
PYTHON_CALLS = ("__dlpack__", "__dlpack_device__")
PYTHON_NAMESPACE = "python::Tensor."

# A torch.nn module's forward, noted as ``module::nn.GRUCell(float64)`` (its dtype) when it returns:
# composite ops choose their kernels by the device type above the dispatcher's view, so the calls
# CPU makes are not the device's (``gru_cell`` runs ``_thnn_fused_gru_cell`` on a privateuse1
# device, a kernel only CUDA has). The probe builds the module from its ModuleInfo in torch's
# module_db and runs it on CPU and on the device (runner/probe/module_replay.py).
MODULE_NAMESPACE = "module::"


class Unreplayable(ValueError):
    """An argument the example format cannot rebuild."""


def _tensor_dtypes(value: Any, torch: Any, out: list[str], layouts: set[str]) -> None:
    if isinstance(value, torch.Tensor):
        out.append(str(value.dtype).removeprefix("torch."))
        if value.layout != torch.strided:
            layouts.add(str(value.layout).removeprefix("torch."))
    elif isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, (torch.Tensor, list, tuple)):
                _tensor_dtypes(item, torch, out, layouts)


@functools.lru_cache(maxsize=None)
def _sparse_flag(op: str) -> int | None:
    """Position of the op's ``sparse: bool`` argument (embedding's and embedding_bag's
    backward), None for an op without one or a name that is no dispatcher op (``python::``,
    ``module::``, a higher-order op)."""
    import torch

    namespace, _, rest = op.partition("::")
    name, _, overload = rest.partition(".")
    try:
        schema = getattr(getattr(getattr(torch.ops, namespace), name), overload or "default")._schema
    except (AttributeError, RuntimeError):
        return None
    for index, argument in enumerate(schema.arguments):
        if argument.name == "sparse" and str(argument.type) == "bool":
            return index
    return None


def _asks_sparse(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    index = _sparse_flag(op)
    if index is None:
        return False
    return (args[index] if index < len(args) else kwargs.get("sparse", False)) is True


def call_key(op: str, args: Iterable[Any], kwargs: dict[str, Any]) -> str:
    """``aten::add.Tensor(float32,float32)``: the op and its tensor arguments' dtypes, in order.

    A tensor argument of another layout than strided names it after the op,
    ``aten::clone[sparse_coo](float32)``: a sparse call runs the device's sparse kernels, a
    dense one its dense kernels, and neither says anything about the other (one example per
    key: a sparse ``clone`` example made every dense ``clone(float32)`` of OpenReg's holdout
    fail in the probe, on Sparseopenreg). So does a call whose ``sparse`` flag is set (dense
    inputs, a sparse COO result): with one key for both, upstream
    test_EmbeddingBag_per_sample_weights_and_new_offsets (``sparse=False``) took the gap of
    another test's ``_embedding_bag_backward(..., sparse=True)`` example, or not, by which
    example a capture's worker met first."""
    import torch

    args = tuple(args)
    dtypes: list[str] = []
    layouts: set[str] = set()
    _tensor_dtypes(args, torch, dtypes, layouts)
    _tensor_dtypes([kwargs[k] for k in sorted(kwargs)], torch, dtypes, layouts)
    if _asks_sparse(op, args, kwargs):
        layouts.add("sparse_coo")
    marker = f"[{','.join(sorted(layouts))}]" if layouts else ""
    return f"{op}{marker}({','.join(dtypes)})"


def dispatch_op(op: str) -> str:
    """``aten::clone[sparse_coo]`` (a key's op part) -> ``aten::clone``: the op to call."""
    return op.partition("[")[0]


def layout_op(key: str) -> str | None:
    """``aten::clone[sparse_coo](float32)`` -> ``aten::clone[sparse_coo]``: a call with a tensor
    of another layout than strided, by its op and marker; None for a strided call, a twin, or an
    op with a ``sparse`` flag, whose marker may be the flag's: a set flag on dense
    inputs says nothing of the test's tensors (upstream test_embedding_padding_idx calls
    ``embedding(..., sparse=True)`` and passes on OpenReg, which has no sparse kernels)."""
    op = split_key(key)[0]
    return op if "[" in op and twin_call(key) == key and _sparse_flag(dispatch_op(op)) is None else None


def split_key(key: str) -> tuple[str, tuple[str, ...]]:
    """``aten::add.Tensor(float32,int64)`` -> (``aten::add.Tensor``, (``float32``, ``int64``))."""
    op, _, rest = key.partition("(")
    inner = rest.removesuffix(")")
    return op, tuple(inner.split(",")) if inner else ()


# A call that raised on CPU is also noted as its raising twin, ``raises:RuntimeError~de8b9bd5:aten::polygamma(float32)``,
# whose example is the raising inputs: the probe replays them on CPU and on the device, and the
# twin works when the device raises the same error (a check the op makes before its kernel).
# The twin names the exception's type and a signature of its message: one example per twin and
# process, and one call raises for different reasons. In different tests: upstream
# test_embedding_scalar_weight_error's 0-d weight, a RuntimeError from embedding's own check;
# another test's index out of range, an IndexError from index_select's kernel. In one test:
# upstream test_view_as_complex expects four RuntimeErrors of view_as_complex, four checks;
# OpenReg makes three and not the fourth ("a stride divisible by 2 for all but last dimension"),
# and one example for all four stood for one of the three.
RAISE_PREFIX = "raises:"
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_NUMBER = re.compile(r"\d+")
# A tensor's type in an error message names its device, as the process last spelt it: CPU's
# ``torch.FloatTensor{[5, 1, 2, 3]}`` is OpenReg's ``openregFloatType{...}`` (upstream
# test_broadcast_to's expand), or ``torch.openreg.FloatTensor{...}`` in a process that touched
# the legacy tensor types first; a raising twin with only that different raises what CPU does.
TENSOR_TYPE = re.compile(r"\b(?:torch\.(?:\w+\.)?\w+Tensor|\w+Type)\{")


def error_signature(message: str) -> str:
    """Eight hex digits for an error's message, the same for the same check whatever the sizes,
    values, addresses and tensor types it names (its first line)."""
    line = message.strip().partition("\n")[0]
    plain = _NUMBER.sub("#", _ADDRESS.sub("0x", TENSOR_TYPE.sub("Tensor{", line)))
    return hashlib.sha256(plain.encode()).hexdigest()[:8]


def raise_call(key: str, error: str, message: str | None = None) -> str:
    """(``aten::polygamma(float32)``, ``RuntimeError``, its message) ->
    ``raises:RuntimeError~<error_signature(message)>:aten::polygamma(float32)``; without a
    message, ``raises:RuntimeError:aten::polygamma(float32)``."""
    signature = "" if message is None else f"~{error_signature(message)}"
    return f"{RAISE_PREFIX}{error}{signature}:{key}"


def is_raise_call(key: str) -> bool:
    return key.startswith(RAISE_PREFIX)


def raised_call(key: str) -> tuple[str, str]:
    """(the call, the exception type's name) a raising twin stands for; (``key``, "") for any other key."""
    if not is_raise_call(key):
        return key, ""
    error, _, call = key.removeprefix(RAISE_PREFIX).partition(":")
    return call, error.partition("~")[0]


# A view call whose result the test then wrote into (an in-place or out= op on it, or on a view
# of it) is also noted as its writing twin, ``writes:aten::unfold(float32)``, with the view call's
# example: the probe replays it and the twin works when the device's result shares its input's
# memory as CPU's does. A device whose view is a copy (OpenReg's ``unfold``, ``view_as_real``)
# runs the call fine, and the write never reaches the input (upstream test_unfold_view: "Expected
# 0.0 but got 1.0"); a test that only reads the view passes there, so the view call itself is no gap.
WRITE_PREFIX = "writes:"


def write_call(key: str) -> str:
    """``aten::unfold(float32)`` -> ``writes:aten::unfold(float32)``."""
    return f"{WRITE_PREFIX}{key}"


def is_write_call(key: str) -> bool:
    return key.startswith(WRITE_PREFIX)


def twin_call(key: str) -> str:
    """The call a raising or writing twin stands for; ``key`` itself for any other key."""
    return key.removeprefix(WRITE_PREFIX) if is_write_call(key) else raised_call(key)[0]


@functools.lru_cache(maxsize=None)
def alias_roles(func: Any) -> tuple[tuple[int, str] | None, tuple[tuple[int, str], ...]]:
    """Of an op overload's arguments (position, name): the one its result is a view of (None
    for an op that returns no view), and the ones whose values it writes (in-place, ``out=``);
    read from its schema's alias annotations (``Tensor(a) self -> Tensor(a)``, ``Tensor(a!) out``)."""
    schema = getattr(func, "_schema", None)
    if schema is None:  # a higher-order op, a Python call
        return None, ()
    arguments = list(enumerate(schema.arguments))
    # A list of views (``split``'s ``Tensor(a)[]``) carries its alias set on the element type:
    # the return's own is empty, so any non-writing alias of a return makes a view op.
    view = any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)
    base = next(((i, a.name) for i, a in arguments if a.alias_info is not None and not a.alias_info.is_write),
                None) if view else None
    # An in-place view op (``transpose_``, ``set_``) changes its argument's shape, not its values.
    if any(getattr(tag, "name", "") == "inplace_view" for tag in getattr(func, "tags", ())):
        return base, ()
    written = tuple((i, a.name) for i, a in arguments if a.alias_info is not None and a.alias_info.is_write)
    return base, written


def tensors_in(value: Any) -> list[Any]:
    """The tensors of a call's argument or result: itself, or those of a (nested) list or tuple."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_in(v)]
    return []


def argument(args: tuple[Any, ...], kwargs: dict[str, Any], where: tuple[int, str]) -> Any:
    """The value of the argument at ``where`` (position, name), given either way."""
    position, name = where
    return args[position] if position < len(args) else kwargs.get(name)


def call_words(key: str) -> str:
    """How a reason names a call: a raising twin as the call with the inputs it raised on, a
    writing twin as the view call whose result the test wrote into."""
    if is_write_call(key):
        return f"{twin_call(key)} (a view the test writes into)"
    call, error = raised_call(key)
    return f"{call} (the inputs that raised {error} on CPU)" if error else key


def python_call(name: str) -> str:
    """``__dlpack__`` -> ``python::Tensor.__dlpack__``: the op part of a :data:`PYTHON_CALLS` call's key."""
    return f"{PYTHON_NAMESPACE}{name}"


def is_python_call(key: str) -> bool:
    """Whether the call ``key`` is a Tensor method of :data:`PYTHON_CALLS`, not a dispatcher op."""
    return key.startswith(PYTHON_NAMESPACE)


def module_call(name: str, dtype: str | None) -> str:
    """(``nn.GRUCell``, ``float64``) -> ``module::nn.GRUCell(float64)``."""
    return f"{MODULE_NAMESPACE}{name}({dtype or ''})"


def is_module_call(key: str) -> bool:
    """Whether the call ``key`` is a torch.nn module's forward (:data:`MODULE_NAMESPACE`)."""
    return key.startswith(MODULE_NAMESPACE)


def is_host_call(key: str) -> bool:
    """Whether the call ``key`` is one of :data:`HOST_CALLS` (any dtypes)."""
    return split_key(key)[0] in HOST_CALLS


def _encode(value: Any, torch: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.Tensor):
        return _encode_tensor(value, torch)
    if isinstance(value, torch.UntypedStorage):
        if value.device.type == "meta" or value.nbytes() > MAX_NUMEL:
            raise Unreplayable(f"storage of {value.nbytes()} bytes on {value.device.type}")
        return {"storage": value.nbytes()}
    if isinstance(value, (list, tuple)):
        return {"list": [_encode(v, torch) for v in value]}
    if isinstance(value, complex):
        return {"complex": [value.real, value.imag]}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device": value.type}
    if isinstance(value, torch.layout):
        return {"layout": str(value).removeprefix("torch.")}
    if isinstance(value, torch.memory_format):
        return {"memory_format": str(value).removeprefix("torch.")}
    raise Unreplayable(type(value).__name__)


def _encode_tensor(t: Any, torch: Any) -> dict[str, Any]:
    if t.layout == torch.sparse_coo and t.device.type != "meta":
        return {"sparse_coo": {"indices": _encode_tensor(t._indices(), torch),
                               "values": _encode_tensor(t._values(), torch),
                               "size": list(t.shape), "coalesced": t.is_coalesced()}}
    if t.layout != torch.strided or t.is_quantized or t.is_nested or t.device.type == "meta":
        raise Unreplayable(f"tensor layout {t.layout}")
    if t.numel() > MAX_NUMEL:
        raise Unreplayable(f"tensor of {t.numel()} elements")
    spec: dict[str, Any] = {"tensor": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                            "stride": list(t.stride())}
    if t.requires_grad:
        spec["grad"] = True
    if (t.dtype == torch.bool or not (t.is_floating_point() or t.is_complex())) and t.numel() <= MAX_VALUES:
        spec["values"] = t.detach().cpu().reshape(-1).tolist() if t.numel() else []
    return spec


def example(args: Iterable[Any], kwargs: dict[str, Any]) -> str | None:
    """The JSON example of one call, or None when it cannot be replayed (see module doc)."""
    import torch

    try:
        text = json.dumps({"args": [_encode(a, torch) for a in args],
                           "kwargs": {k: _encode(v, torch) for k, v in sorted(kwargs.items())}})
    except (Unreplayable, ValueError, TypeError, RuntimeError):
        return None
    return text if len(text) <= MAX_CHARS else None


# --- rebuilding ----------------------------------------------------------------------------
def _storage_size(shape: list[int], stride: list[int]) -> int:
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((n - 1) * st for n, st in zip(shape, stride))


def _fresh(spec: dict[str, Any], gen: Any, torch: Any) -> Any:
    dtype = getattr(torch, spec["tensor"])
    shape, stride = spec["shape"], spec["stride"]
    if "values" in spec:
        base = torch.tensor(spec["values"], dtype=dtype).reshape(shape)
        return base.requires_grad_() if spec.get("grad") else base
    size = _storage_size(shape, stride)
    if dtype.is_floating_point or dtype.is_complex:
        # In [0.5, 1.5): positive and away from zero, so log/sqrt/div give finite results.
        base = (torch.rand(size, generator=gen, dtype=torch.float64) + 0.5).to(dtype)
    else:
        base = torch.zeros(size, dtype=dtype)  # zero: a valid index into any non-empty dim
    t = base.as_strided(shape, stride)
    return t.detach().requires_grad_() if spec.get("grad") and (dtype.is_floating_point or dtype.is_complex) else t


def _decode(value: Any, gen: Any, torch: Any) -> Any:
    if not isinstance(value, dict):
        return value
    if "tensor" in value:
        return _fresh(value, gen, torch)
    if "sparse_coo" in value:
        spec = value["sparse_coo"]
        return torch.sparse_coo_tensor(_fresh(spec["indices"], gen, torch), _fresh(spec["values"], gen, torch).detach(),
                                       spec["size"], is_coalesced=spec["coalesced"] and "values" in spec["indices"])
    if "storage" in value:  # fresh bytes: what a storage holds is the tensors' business
        return torch.zeros(value["storage"], dtype=torch.uint8).untyped_storage()
    if "list" in value:
        return [_decode(v, gen, torch) for v in value["list"]]
    if "complex" in value:
        return complex(*value["complex"])
    if "dtype" in value:
        return getattr(torch, value["dtype"])
    if "device" in value:
        return torch.device(value["device"])
    if "layout" in value:
        return getattr(torch, value["layout"])
    if "memory_format" in value:
        return getattr(torch, value["memory_format"])
    raise Unreplayable(f"unknown argument spec {sorted(value)}")


def rebuild(text: str, seed: int = 0) -> tuple[list[Any], dict[str, Any]]:
    """Fresh CPU arguments for the example ``text`` (deterministic for a ``seed``)."""
    import torch

    data = json.loads(text)
    gen = torch.Generator().manual_seed(seed)
    return ([_decode(a, gen, torch) for a in data["args"]],
            {k: _decode(v, gen, torch) for k, v in data["kwargs"].items()})


def to_device(value: Any, device: str, *, move: bool = True) -> Any:
    """``value`` with every tensor and storage moved to ``device`` (strides and aliasing kept)
    and every ``torch.device`` argument replaced by ``device``; ``move=False``: the devices
    replaced only (a host call's tensors stay on the host)."""
    import torch

    if not move and not isinstance(value, (torch.device, list, tuple, dict)):
        return value
    if isinstance(value, torch.Tensor) and value.layout != torch.strided:
        return value.detach().to(device)  # its own layout's kernels on the device (sparse COO)
    if isinstance(value, torch.Tensor):
        moved = _move(value, device)
        return moved.detach().requires_grad_() if value.requires_grad and value.is_leaf else moved
    if isinstance(value, torch.UntypedStorage):
        # Through a byte tensor: the storage the device allocates, as a device tensor's has.
        return torch.empty(0, dtype=torch.uint8).set_(value).to(device).untyped_storage()
    if isinstance(value, torch.device):
        return torch.device(device)
    if isinstance(value, (list, tuple)):  # a tuple: a module's sample (runner/probe/module_replay.py)
        return type(value)(to_device(v, device, move=move) for v in value)
    if isinstance(value, dict):
        return {k: to_device(v, device, move=move) for k, v in value.items()}
    return value


def _move(t: Any, device: str) -> Any:
    if t.is_contiguous():
        return t.detach().to(device)
    # Non-contiguous (expanded, transposed): move the storage and view it the same way, so
    # the device sees the strides the test had.
    base = t.detach().as_strided((_storage_size(list(t.shape), list(t.stride())),), (1,), t.storage_offset())
    return base.to(device).as_strided(t.shape, t.stride())
