"""The `torch.curatedev` runtime module (what torch._register_device_module wants).

One device, host memory, no streams of its own. Random ops run on CPU through the
fallback with the CPU generator, so seeding delegates to torch's CPU seed.
"""

from __future__ import annotations

import torch

_DEVICE_COUNT = 1


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return True


def _lazy_init() -> None:
    """Nothing to initialise: the extension is loaded before registration."""


def _is_in_bad_fork() -> bool:
    # Host memory survives fork(), so a forked child may use the device.
    return False


def device_count() -> int:
    return _DEVICE_COUNT


def current_device() -> int:
    return 0


def set_device(device: int | str | torch.device) -> None:
    index = torch.device(device).index if not isinstance(device, int) else device
    if index not in (None, 0):
        raise RuntimeError(f"curatedev has one device (index 0), got {device!r}")


def synchronize(device: int | str | torch.device | None = None) -> None:
    """Kernels run synchronously on the host."""


def manual_seed(seed: int) -> None:
    torch.random.default_generator.manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    manual_seed(seed)


def get_rng_state(device: int | str | torch.device = "curatedev") -> torch.Tensor:
    return torch.random.get_rng_state()


def set_rng_state(state: torch.Tensor, device: int | str | torch.device = "curatedev") -> None:
    torch.random.set_rng_state(state)


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float16, torch.bfloat16]
