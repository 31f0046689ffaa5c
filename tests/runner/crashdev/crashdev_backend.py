"""A backend variant for the probe's tests: the curatedev example backend plus op kernels
that misbehave on the device, registered for PrivateUse1 ahead of curatedev's fallback.

- ``aten::flip``: the kernel aborts the process (SIGABRT), as a broken native kernel would;
- ``aten::roll``: the kernel never returns (a hang);
- ``aten::neg``: the kernel returns a wrong result (``x`` instead of ``-x``).

Imported by the probe worker as ``--curate-backend crashdev_backend:setup``.
"""

from __future__ import annotations

import os
import time

import curatedev  # noqa: F401 - registers the device and its allowlist fallback
import torch

_LIB = torch.library.Library("aten", "IMPL")


def _abort(*args: object, **kwargs: object) -> torch.Tensor:
    os.abort()


def _hang(*args: object, **kwargs: object) -> torch.Tensor:
    while True:
        time.sleep(1)


def _wrong_neg(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


_LIB.impl("flip", _abort, "PrivateUse1")
_LIB.impl("roll", _hang, "PrivateUse1")
_LIB.impl("neg", _wrong_neg, "PrivateUse1")


def setup() -> None:
    """Nothing more to do: importing the module registered everything."""
