"""A backend variant for the probe's tests: the curatedev example backend plus host pinning.

curatedev registers no PrivateUse1 hooks, so ``tensor.pin_memory()`` fails in a process that
loaded it, as it does for any young privateuse1 backend without a pinned host allocator. This
variant gives pinning a host kernel (a copy, as a host allocator that pins would return), so
the probe's host-call replay has a backend where pinning works to compare with.

Imported by the probe worker as ``--curate-backend pinhost_backend:setup``.
"""

from __future__ import annotations

import curatedev  # noqa: F401 - registers the device and its allowlist fallback
import torch

_LIB = torch.library.Library("aten", "IMPL")


def _pin(x: torch.Tensor, device: torch.device | None = None) -> torch.Tensor:
    return x.clone()


def _is_pinned(x: torch.Tensor, device: torch.device | None = None) -> bool:
    return False


_LIB.impl("_pin_memory", _pin, "CPU")
_LIB.impl("is_pinned", _is_pinned, "CPU")


def setup() -> None:
    """Nothing more to do: importing the module registered everything."""
