"""Make PyTorch's device-generic tests instantiate for curatedev.

`instantiate_device_type_tests` reads the device list that
torch.testing._internal.common_device_type builds at import, so the device must
be registered first; then PrivateUse1TestBase.device_type set to "curatedev"
names classes TestFooCURATEDEV and tests test_bar_curatedev_float32.
"""

from __future__ import annotations

import os
import sys

from . import BACKEND_NAME, load

ONLY_FOR_ENV = "PYTORCH_TESTING_DEVICE_ONLY_FOR"
CDT = "torch.testing._internal.common_device_type"


def setup_device_type_tests(only_this_device: bool = True) -> None:
    """Register curatedev with PyTorch's device-generic test machinery.

    Call it before test modules are imported (a conftest.py or a pytest plugin
    at configure time). With only_this_device, PYTORCH_TESTING_DEVICE_ONLY_FOR
    is set to "curatedev" unless the caller already set it, so CPU variants are
    not instantiated next to ours.
    """
    imported_before = CDT in sys.modules
    load()
    if only_this_device:
        os.environ.setdefault(ONLY_FOR_ENV, BACKEND_NAME)
    from torch.testing._internal import common_device_type as cdt

    if imported_before and cdt.PrivateUse1TestBase not in cdt.device_type_test_bases:
        # common_device_type was imported before the device existed and left
        # privateuse1 out of its list; add it as its own import would have.
        cdt.device_type_test_bases.append(cdt.PrivateUse1TestBase)
    cdt.PrivateUse1TestBase.device_type = BACKEND_NAME
