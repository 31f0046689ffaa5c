"""Project-wide test setup."""

from __future__ import annotations

import os

# No test may reach the network; the embedding model is loaded from its package.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# pytester's in-process runs drop modules first imported inside them; re-importing
# torch's testing internals (and hypothesis, which they import) in one process segfaults
# during garbage collection. Importing them once here keeps them in the snapshot.
import torch.testing._internal.common_device_type  # noqa: E402,F401
import torch.testing._internal.common_methods_invocations  # noqa: E402,F401
import torch.testing._internal.common_modules  # noqa: E402,F401
import torch.testing._internal.common_utils  # noqa: E402,F401
