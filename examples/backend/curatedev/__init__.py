"""curatedev: an example out-of-tree PyTorch backend used as a test target.

`import curatedev` builds (first time) or loads (cached) the C++ extension and
registers the PrivateUse1 device under the name "curatedev". Importing again, or
calling load() again, does nothing more. See examples/backend/README.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch

from . import _build, _device, _policy

BACKEND_NAME = "curatedev"
COMPARISON_OPS = _policy.COMPARISON_OPS
DEFAULT_OPS = _policy.DEFAULT_OPS
_POLICY = _policy.Policy()
_STATE: dict[str, float | bool] = {"loaded": False, "seconds": 0.0, "compiled": False}


class CuratedevError(RuntimeError):
    """Registration conflicts (another privateuse1 backend is already named)."""


def _register() -> None:
    current = torch._C._get_privateuse1_backend_name()
    if current not in ("privateuseone", BACKEND_NAME):
        raise CuratedevError(
            f"privateuse1 is already renamed to {current!r}; curatedev needs it for itself"
        )
    if current == "privateuseone":
        torch.utils.rename_privateuse1_backend(BACKEND_NAME)
    if getattr(torch, BACKEND_NAME, None) is None:
        torch._register_device_module(BACKEND_NAME, _device)
    if not hasattr(torch.Tensor, f"is_{BACKEND_NAME}"):
        torch.utils.generate_methods_for_privateuse1_backend()


@contextmanager
def diagnostics() -> Iterator[None]:
    """Lift every allowlist on this thread (printing, debugging)."""
    ext = _POLICY.ext
    assert ext is not None, "curatedev.load() has not run"
    ext.enter_harness()
    try:
        yield
    finally:
        ext.exit_harness()


def _install_print_hook() -> None:
    # Printing runs ~13 ops (some in float64) on the tensor's device. A failing
    # assertEqual prints its tensors, so printing must not fail on a missing op
    # and replace the real error with a second one.
    import torch._tensor_str as tensor_str

    original = tensor_str._str
    if getattr(original, "_curatedev_hook", False):
        return

    def _str(self: torch.Tensor, *, tensor_contents: str | None = None) -> str:
        if self.device.type != BACKEND_NAME:
            return original(self, tensor_contents=tensor_contents)
        with diagnostics():
            return original(self, tensor_contents=tensor_contents)

    _str._curatedev_hook = True  # type: ignore[attr-defined]
    tensor_str._str = _str


def load(verbose: bool = False) -> None:
    """Build or load the extension, register the device, apply env allowlists."""
    if _STATE["loaded"]:
        return
    ext, seconds, compiled = _build.load_extension(verbose=verbose)
    _register()
    ext.register_hooks()
    _policy.configure_from_env(_POLICY, ext)
    _install_print_hook()
    _STATE.update(loaded=True, seconds=seconds, compiled=compiled)


def load_info() -> dict[str, float | bool]:
    """{'loaded', 'seconds' (build or cached load), 'compiled' (built in this process)}."""
    return dict(_STATE)


def set_allowed_ops(ops: Iterable[str] | str) -> None:
    """Replace the op allowlist: names ('add.Tensor', 'add', 'aten::mm') or '*'."""
    entries = _policy.split_entries(ops) if isinstance(ops, str) else list(ops)
    _policy.push_ops(_POLICY, entries, "set_allowed_ops")


def allowed_ops() -> tuple[str, ...]:
    """The op allowlist as given (env var, default or set_allowed_ops)."""
    return _POLICY.ops


def set_allowed_dtypes(dtypes: Iterable[str | torch.dtype] | str) -> None:
    """Replace the dtype allowlist: 'float32,bfloat16', torch dtypes, or '*'."""
    entries = _policy.split_entries(dtypes) if isinstance(dtypes, str) else list(dtypes)
    _policy.push_dtypes(_POLICY, entries, "set_allowed_dtypes")


def allowed_dtypes() -> tuple[torch.dtype, ...] | str:
    """The allowed dtypes, or '*' when every dtype is allowed."""
    return _policy.ALL if _POLICY.all_dtypes else _POLICY.dtypes


def set_low_precision_ops(ops: Iterable[str] | str) -> None:
    """Ops whose floating results are rounded through bfloat16."""
    entries = _policy.split_entries(ops) if isinstance(ops, str) else list(ops)
    _policy.push_low_precision(_POLICY, entries, "set_low_precision_ops")


def low_precision_ops() -> tuple[str, ...]:
    return _POLICY.low_precision


def reset_from_env() -> None:
    """Re-read CURATEDEV_* env vars (defaults where unset)."""
    assert _POLICY.ext is not None, "curatedev.load() has not run"
    _policy.configure_from_env(_POLICY, _POLICY.ext)


load()
