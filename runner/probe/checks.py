"""The checks ``testcurator profile init`` runs on a backend's device, one per dtype and hook.

Each check does on the device what the tests that a dtype or hook opens up would do first,
and compares with CPU: a profile that lists a hook or dtype then says "this ran here", not
"the backend's authors meant it to". A check passes by returning; it fails by raising, and
:func:`step` turns the exception into one line, ``WHAT failed: Type: message``, because the
line ends up as a comment in the profile and a traceback there would bury the point.

The checks run in a worker process (runner/probe/profile_worker.py) that may die under one
of them; nothing here guards against that. torch is imported inside the checks so that the
parent (runner/probe/profile.py) can read :data:`CHECKS` without importing it.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor  # a string annotation: TorchScript reads "Tensor" as its own

#: Dtypes probed, in the order a profile lists them (names as in testcurator.config.schema).
DTYPES = ("float32", "float64", "float16", "bfloat16", "complex64", "complex128",
          "int8", "int16", "int32", "int64", "uint8", "bool")
MAX_MESSAGE = 160


class CheckFailed(Exception):
    """A check's failure, already worded as the one line the profile shows."""


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (cut at MAX_MESSAGE): never a traceback."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    message = lines[0] if lines else ""
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE].rstrip() + " ..."
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


@contextmanager
def step(what: str) -> Iterator[None]:
    """Name the step an exception came from: ``to_sparse failed: NotImplementedError: ...``."""
    try:
        yield
    except CheckFailed:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the backend raises is the finding
        raise CheckFailed(f"{what} failed: {one_line(exc)}") from None


def same(got: Any, want: Any, what: str, *, exact: bool = False) -> None:
    """``got`` (moved to CPU) equals the CPU result ``want``, else a one-line CheckFailed."""
    import torch

    with step(f"{what}: copy to CPU"):
        got = got.cpu()
    try:
        if exact:
            torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
        else:
            torch.testing.assert_close(got, want, equal_nan=True)
    except AssertionError as exc:
        detail = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())[:MAX_MESSAGE]
        raise CheckFailed(f"{what}: wrong result: {detail}") from None


def on_device(t: Any, device: str, what: str) -> None:
    """A result that should be on the device is there (a fallback may hand back a CPU tensor)."""
    if t.device.type != device:
        raise CheckFailed(f"{what}: the result is on {t.device.type}, not on {device}")


def sample(name: str) -> Any:
    """A small CPU tensor of dtype ``name`` whose x + x is exact in that dtype."""
    import torch

    dtype = getattr(torch, name)
    if dtype is torch.bool:
        return torch.tensor([True, False, True, False])
    if dtype.is_complex:
        return torch.tensor([1 + 2j, -0.5 + 1j, 3 - 1j, 0j], dtype=dtype)
    if dtype.is_floating_point:
        return torch.tensor([1.5, -2.0, 0.25, 3.0], dtype=dtype)
    return torch.tensor([1, 2, 3, 4], dtype=dtype)


def check_dtype(name: str, device: str) -> None:
    """Allocate, copy in, x + x (bool: x | x) on the device, copy back, compare with CPU."""
    import torch

    cpu = sample(name)
    with step(f"empty({name})"):
        torch.empty(4, dtype=cpu.dtype, device=device)
    with step("copy to the device"):
        x = cpu.to(device)
    op = "x | x" if cpu.dtype is torch.bool else "x + x"
    with step(op):
        y = x | x if cpu.dtype is torch.bool else x + x
    on_device(y, device, op)
    same(y, cpu | cpu if cpu.dtype is torch.bool else cpu + cpu, op, exact=True)


def _pair() -> tuple[Any, Any]:
    import torch

    gen = torch.Generator().manual_seed(0)
    return torch.randn(3, 4, generator=gen), torch.randn(4, 2, generator=gen)


def eager_ops(device: str) -> None:
    """Elementwise, matmul, views and basic indexing: what nearly every eager test does first."""
    a, b = _pair()
    with step("copy to the device"):
        da, db = a.to(device), b.to(device)
    ops: list[tuple[str, Callable[[Any, Any], Any]]] = [
        ("add", lambda x, y: x + x), ("mul", lambda x, y: x * 2.5), ("matmul", lambda x, y: x @ y),
        ("view", lambda x, y: x.view(12)), ("reshape", lambda x, y: x.reshape(4, 3)), ("index", lambda x, y: x[1, 1:3]),
    ]
    for what, fn in ops:
        with step(what):
            got = fn(da, db)
        on_device(got, device, what)
        same(got, fn(a, b), what)


def autograd(device: str) -> None:
    """Backward through matmul, mul and a reduction; the device leaves' grads match CPU's."""
    a, b = _pair()

    def loss(x: Any, y: Any) -> Any:
        return ((x @ y) * 2 + x.sum()).sum()

    ca, cb = a.clone().requires_grad_(), b.clone().requires_grad_()
    loss(ca, cb).backward()
    with step("copy to the device"):
        da, db = a.to(device).requires_grad_(), b.to(device).requires_grad_()
    with step("forward"):
        out = loss(da, db)
    with step("backward"):
        out.backward()
    if da.grad is None or db.grad is None:
        raise CheckFailed("backward: no gradient reached the device leaves")
    same(da.grad, ca.grad, "backward: grad of x")
    same(db.grad, cb.grad, "backward: grad of y")


def complex_(device: str) -> None:
    """complex64 arithmetic, abs and ``.real``: what complex-dtype tests do first."""
    z = sample("complex64")
    with step("copy to the device"):
        dz = z.to(device)
    ops: list[tuple[str, Callable[[Any], Any]]] = [("mul", lambda t: t * t), ("abs", lambda t: t.abs()),
                                                   (".real", lambda t: t.real)]
    for what, fn in ops:
        with step(what):
            got = fn(dz)
        same(got, fn(z), what)


def sparse(device: str) -> None:
    """A COO tensor made from a device tensor, and back: the sparse layouts' entry point."""
    a, _ = _pair()
    with step("to_sparse"):
        s = a.to(device).to_sparse()
    on_device(s, device, "to_sparse")
    with step("to_dense"):
        back = s.to_dense()
    same(back, a, "to_sparse().to_dense()")


def quantized(device: str) -> None:
    """A quantized tensor on the device, and back: the quantized kernels' entry point."""
    import torch

    a, _ = _pair()
    with step("quantize_per_tensor"):
        q = torch.quantize_per_tensor(a.to(device), 0.05, 0, torch.qint8)
    on_device(q, device, "quantize_per_tensor")
    with step("dequantize"):
        back = q.dequantize()
    same(back, torch.quantize_per_tensor(a, 0.05, 0, torch.qint8).dequantize(), "dequantize")


def random(device: str) -> None:
    """Sampling on the device, and a device generator that seeds it reproducibly."""
    import torch

    with step("rand"):
        r = torch.rand(64, device=device)
    on_device(r, device, "rand")
    with step("rand: copy to CPU"):
        values = r.cpu()
    if not bool(((values >= 0) & (values < 1)).all()):
        raise CheckFailed("rand: values outside [0, 1)")
    with step("Generator(device)"):
        gen = torch.Generator(device=device)
    with step("rand(generator=)"):
        first = torch.rand(8, device=device, generator=gen.manual_seed(0)).cpu()
        again = torch.rand(8, device=device, generator=gen.manual_seed(0)).cpu()
    if not torch.equal(first, again):
        raise CheckFailed("rand(generator=): the same seed gave different numbers")


def fft(device: str) -> None:
    """A real-to-complex FFT, compared with CPU's."""
    import torch

    a, _ = _pair()
    with step("fft.fft"):
        got = torch.fft.fft(a.to(device))
    same(got, torch.fft.fft(a), "fft.fft")


def linalg(device: str) -> None:
    """A matrix inverse (well conditioned), compared with CPU's."""
    import torch

    m = torch.randn(4, 4, generator=torch.Generator().manual_seed(1)) + 4 * torch.eye(4)
    with step("linalg.inv"):
        got = torch.linalg.inv(m.to(device))
    same(got, torch.linalg.inv(m), "linalg.inv")


def amp(device: str) -> None:
    """matmul under ``autocast(device_type=device)`` runs in the lower precision, as AMP tests expect."""
    import torch

    a, b = _pair()
    with step("autocast"):
        ctx = torch.autocast(device_type=device)
    with step("copy to the device"):
        da, db = a.to(device), b.to(device)
    with step("matmul under autocast"):
        with ctx:
            got = da @ db
    if got.dtype == torch.float32:
        raise CheckFailed(f"autocast(device_type={device!r}) left matmul in float32 (no autocast kernels)")
    same(got.float(), (a @ b), f"matmul under autocast ({got.dtype})")


def serialization(device: str) -> None:
    """torch.save/torch.load of a device tensor comes back on the device, equal."""
    import torch

    a, _ = _pair()
    buf = io.BytesIO()
    with step("torch.save"):
        torch.save(a.to(device), buf)
    buf.seek(0)
    with step("torch.load"):
        back = torch.load(buf)
    on_device(back, device, "torch.load")
    same(back, a, "torch.save/torch.load round trip")


def nested(device: str) -> None:
    """A nested tensor on the device, an op on it, and its components back."""
    import torch

    parts = [torch.arange(6.0).reshape(2, 3), torch.arange(12.0).reshape(4, 3)]
    with step("nested.nested_tensor"):
        nt = torch.nested.nested_tensor(parts, device=device)
    on_device(nt, device, "nested.nested_tensor")
    with step("nested + nested"):
        twice = nt + nt
    with step("unbind"):
        got = twice.unbind()
    for g, p in zip(got, parts):
        same(g, p + p, "nested + nested")


def _scripted(x: Tensor, y: Tensor) -> Tensor:
    return x * y + x


def jit(device: str) -> None:
    """A TorchScript function run on device tensors."""
    import torch

    a, _ = _pair()
    with step("jit.script"):
        fn = torch.jit.script(_scripted)
    with step("scripted function"):
        got = fn(a.to(device), a.to(device))
    same(got, _scripted(a, a), "scripted function")


def compile_(device: str) -> None:
    """torch.compile tracing device tensors (aot_eager: Dynamo and AOTAutograd, no code generation)."""
    import torch

    a, b = _pair()
    fn = torch.compile(lambda x, y: (x @ y).relu() * 2 + 1, backend="aot_eager", fullgraph=True)
    with step("copy to the device"):
        da, db = a.to(device), b.to(device)
    with step("torch.compile(backend='aot_eager')"):
        got = fn(da, db)
    same(got, (a @ b).relu() * 2 + 1, "compiled function")


#: Every check, in the order they run: cheap ones first, torch.compile (seconds) last.
#: Keys are ``dtype:NAME`` and ``hook:NAME`` (hook names: testcurator.config.profile.HOOKS).
CHECKS: dict[str, Callable[[str], None]] = {
    **{f"dtype:{name}": partial(check_dtype, name) for name in DTYPES},
    "hook:eager_ops": eager_ops, "hook:autograd": autograd, "hook:complex": complex_, "hook:sparse": sparse,
    "hook:quantized": quantized, "hook:random": random, "hook:fft": fft, "hook:linalg": linalg, "hook:amp": amp,
    "hook:serialization": serialization, "hook:nested": nested, "hook:jit": jit, "hook:compile": compile_,
}
