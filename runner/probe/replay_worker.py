"""One probe batch, in its own process: ``python -m testcurator.runner.probe.replay_worker IN OUT``.

IN (JSON): ``{"device": "curatedev", "backend": "pkg.mod:setup" | null, "calls": [[key,
example], ...]}``. The worker imports the backend as the test runs do (``--curate-backend``),
then replays each call from its example (plugin/callspec.py): on CPU, then on the device
from the same inputs, and compares the results. OUT gets JSON lines, each flushed: ``{"ready":
torch version}`` once, then per call ``{"start": key}`` and its result ``{"call", "status",
"error", "seconds"}``. A call that kills or hangs the process leaves a ``start`` without a
result: the parent (runner/probe/replay.py) names it ``crash`` and replays the rest in a new process.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path
from typing import IO, Any

from testcurator.plugin.callspec import (
    PYTHON_NAMESPACE,
    TENSOR_TYPE,
    alias_roles,
    argument,
    dispatch_op,
    is_host_call,
    is_module_call,
    is_python_call,
    is_raise_call,
    is_write_call,
    raised_call,
    rebuild,
    split_key,
    tensors_in,
    to_device,
    twin_call,
)
from testcurator.runner.probe import module_replay
from testcurator.runner.results.classify import classify

# Ops whose outputs are not defined by their inputs: they are run, not compared.
_UNCOMPARED = ("empty", "new_empty", "resize", "set_", "random", "uniform", "normal", "bernoulli", "exponential",
               "cauchy", "geometric", "log_normal", "rand", "multinomial", "native_dropout", "dropout")
MAX_ERROR = 600


def resolve(op: str) -> Any:
    """``aten::add.Tensor`` -> ``torch.ops.aten.add.Tensor`` (no overload: ``.default``);
    ``python::Tensor.__dlpack__`` -> ``torch.Tensor.__dlpack__`` (callspec.PYTHON_CALLS)."""
    import torch

    if is_python_call(op):
        return getattr(torch.Tensor, op.removeprefix(PYTHON_NAMESPACE))
    namespace, _, rest = dispatch_op(op).partition("::")
    name, _, overload = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace), name), overload or "default")


def _compared(func: Any, key: str) -> bool:
    import torch

    if is_python_call(key):  # what they return names the device (DLPack's device tuple)
        return False
    name = dispatch_op(split_key(key)[0]).partition("::")[2]
    return torch.Tag.nondeterministic_seeded not in func.tags and not name.startswith(_UNCOMPARED)


def _text(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()[:MAX_ERROR]


def _failed(exc: BaseException) -> tuple[str, str]:
    text = _text(exc)
    cls = classify(text).failure_class
    return {"unsupported_op": "missing_kernel", "unsupported_dtype": "unsupported_dtype"}.get(cls, "error"), text


def replay(key: str, example: str, device: str) -> tuple[str, str]:
    """(status, error text) of one call: see testcurator.vocab.PROBE_STATUSES.

    The capture saw the call below autograd, so it is replayed without it (an in-place op on
    a leaf that requires grad is what autograd's own kernel did, not an error)."""
    import torch

    if is_module_call(key):  # a module runs as a test runs it, with autograd
        return _replay_module(key, example, device)
    with torch.no_grad():
        if is_raise_call(key):
            return _replay_raising(raised_call(key)[0], example, device)
        if is_write_call(key):
            return _replay_view(twin_call(key), example, device)
        return _host(key, example, device) if is_host_call(key) else _replay(key, example, device)


def _rebuilt(key: str, example: str) -> tuple[Any, list[Any], dict[str, Any]]:
    """The call's function and its example's arguments, fresh."""
    args, kwargs = rebuild(example)
    return resolve(split_key(key)[0]), args, kwargs


def _replay_raising(key: str, example: str, device: str) -> tuple[str, str]:
    """A call's raising inputs (callspec.RAISE_PREFIX): ``works`` when the device raises what CPU
    raises (type and message); else the device's own error, or an error saying it did not raise."""
    try:
        func, args, kwargs = _rebuilt(key, example)
    except Exception as exc:  # noqa: BLE001 - not an example this torch can rebuild
        return "not_probed", f"CPU replay failed: {_text(exc)}"
    try:
        func(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the error CPU raises is what the device must match
        expected = exc
    else:
        return "not_probed", "CPU replay did not raise"
    dev_args, dev_kwargs = rebuild(example)
    try:
        func(*to_device(dev_args, device), **to_device(dev_kwargs, device))
    except Exception as exc:  # noqa: BLE001 - the device's own error is the finding
        if same_error(exc, expected):
            return "works", ""
        return _failed(exc)
    return "error", f"raised on CPU, not on the device: {_text(expected)}"


def _shares(result: Any, base: Any) -> bool:
    """Whether every tensor of ``result`` lies in ``base``'s memory (a view of it)."""
    tensors = tensors_in(result)
    start = base.untyped_storage().data_ptr()
    return bool(tensors) and bool(start) and all(t.untyped_storage().data_ptr() == start for t in tensors)


def _replay_view(key: str, example: str, device: str) -> tuple[str, str]:
    """A view call's writing twin (callspec.WRITE_PREFIX): ``works`` when the device's result
    shares its input's memory as CPU's does; ``wrong_result`` when it is a copy there (what a
    test writes into it does not reach the input). The call's own failures are its own replay's."""
    try:
        func, args, kwargs = _rebuilt(key, example)
        where = alias_roles(func)[0]
        if where is None:
            return "not_probed", "no view op"
        if not _shares(func(*args, **kwargs), argument(args, kwargs, where)):
            return "not_probed", "on CPU its result is no view of its input"
    except Exception as exc:  # noqa: BLE001 - not an example this torch can rebuild
        return "not_probed", f"CPU replay failed: {_text(exc)}"
    dev_args, dev_kwargs = rebuild(example)
    dev_args, dev_kwargs = to_device(dev_args, device), to_device(dev_kwargs, device)
    try:
        got = func(*dev_args, **dev_kwargs)
    except Exception as exc:  # noqa: BLE001 - the call's own replay reports it
        return "not_probed", f"left to the call's own replay: {_text(exc)}"
    if _shares(got, argument(dev_args, dev_kwargs, where)):
        return "works", ""
    return "wrong_result", (f"on CPU its result is a view of its input, on {device} a copy: what the test writes "
                            "into it does not reach the input")


def same_error(raised: BaseException, expected: BaseException) -> bool:
    """Whether the device raised what CPU raised: the same type, the same message but for the
    tensor types it names (callspec.TENSOR_TYPE)."""
    def plain(exc: BaseException) -> str:
        return TENSOR_TYPE.sub("Tensor{", str(exc))

    return type(raised) is type(expected) and plain(raised) == plain(expected)


def _replay_module(key: str, example: str, device: str) -> tuple[str, str]:
    """A module's forward (runner/probe/module_replay.py): its ModuleInfo's first sample, on CPU
    and on the device; a device failure in an op CPU called too is left to that op's calls."""
    try:
        info = module_replay.module_info(key)
        if info is None:
            return "not_probed", "no ModuleInfo in torch's module_db builds this module"
        dtype, sample = module_replay.sample(info, example)
        cpu_ops = module_replay.run(info, dtype, sample, "cpu")
    except Exception as exc:  # noqa: BLE001 - CPU cannot run the sample: nothing to learn
        return "not_probed", f"CPU replay failed: {_text(exc)}"
    try:
        module_replay.run(info, dtype, sample, device)
    except Exception as exc:  # noqa: BLE001 - the device's own error is the finding
        status, error = _failed(exc)
        if module_replay.deferred(error, cpu_ops):
            return "not_probed", f"left to the op's own calls (CPU's run calls it too): {error}"
        return status, error
    return "works", ""


def _host(key: str, example: str, device: str) -> tuple[str, str]:
    """A host call (callspec.HOST_CALLS): its tensors stay on the host, its device is the
    device; this process has the backend loaded, which is what the call depends on."""
    try:
        func, args, kwargs = _rebuilt(key, example)
    except Exception as exc:  # noqa: BLE001 - not an example this torch can rebuild
        return "not_probed", f"CPU replay failed: {_text(exc)}"
    try:
        func(*to_device(args, device, move=False), **to_device(kwargs, device, move=False))
    except Exception as exc:  # noqa: BLE001 - the backend's own error is the finding
        return _failed(exc)
    return "works", ""


def _replay(key: str, example: str, device: str) -> tuple[str, str]:
    op = split_key(key)[0]
    try:
        func = resolve(op)
        args, kwargs = rebuild(example)
        expected = func(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - CPU cannot run the example: nothing to learn
        return "not_probed", f"CPU replay failed: {_text(exc)}"
    dev_args, dev_kwargs = rebuild(example)
    try:
        got = func(*to_device(dev_args, device), **to_device(dev_kwargs, device))
        got_cpu = [t.detach().to("cpu") for t in tensors_in(got)]
    except Exception as exc:  # noqa: BLE001 - the device's own error is the finding
        return _failed(exc)
    if _compared(func, key):
        want = [t.detach() for t in tensors_in(expected)]
        try:
            _assert_same(got_cpu, want)
        except AssertionError as exc:
            if not cpu_steady(func, example, want):
                return "not_probed", "CPU's own result changes from one replay of the example to the next"
            return "wrong_result", _text(exc)
    return "works", ""


def _assert_same(got: list[Any], want: list[Any], **tolerance: float) -> None:
    """``got``'s tensors are ``want``'s (NaN where NaN; strides and devices aside), or AssertionError."""
    import torch

    if len(want) != len(got):
        raise AssertionError(f"{len(got)} tensor result(s) on the device, {len(want)} on CPU")
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, equal_nan=True, check_stride=False, check_device=False, **tolerance)


def cpu_steady(func: Any, example: str, want: list[Any]) -> bool:
    """Whether CPU gives ``want`` again: a result that differs from the device's is the
    device's fault only if CPU's is what CPU always gives (a kernel that reads memory the
    example leaves unset does not)."""
    try:
        args, kwargs = rebuild(example)
        _assert_same([t.detach() for t in tensors_in(func(*args, **kwargs))], want, rtol=0, atol=0)
    except Exception:  # noqa: BLE001 - a second replay that fails or differs is not steady
        return False
    return True


def _write(out: IO[str], data: dict[str, Any]) -> None:
    out.write(json.dumps(data, sort_keys=True) + "\n")
    out.flush()


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    import torch

    if spec.get("backend"):
        from testcurator.plugin.entry import import_backend

        import_backend(spec["backend"])
    with open(argv[1], "a", encoding="utf-8") as out:
        _write(out, {"ready": torch.__version__})
        for key, example in spec["calls"]:
            _write(out, {"start": key})
            started = time.perf_counter()
            status, error = replay(key, example, spec["device"])
            _write(out, {"call": key, "status": status, "error": error,
                         "seconds": round(time.perf_counter() - started, 6)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
