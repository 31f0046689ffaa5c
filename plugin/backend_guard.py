"""Keep the backend under test registered while upstream tests run beside it.

A few upstream tests exercise privateuse1's registration itself on a process that has none
(test_extension_utils.py's ``tearDown`` deletes ``torch.<privateuse1 name>`` and its
``sys.modules`` entry after every test). In a process whose privateuse1 backend is the one
under test, that removes the backend's device module: every device-generic class set up
later in the process fails in ``PrivateUse1TestBase.setUpClass`` ("torch has no module of
`curatedev`"), which on real upstream files turned 10,060 instances of test_unary_ufuncs
into errors that said nothing about the backend.

Registered with ``--curate-backend``: after each test, the device module is put back if the
test removed it, and the terminal summary names the tests that did.
"""

from __future__ import annotations

import sys
from collections.abc import Generator
from typing import Any

import pytest


class BackendGuard:
    """Restores ``torch.<name>`` (and ``sys.modules['torch.<name>']``) after each test."""

    def __init__(self, torch: Any, name: str) -> None:
        self.torch, self.name = torch, name
        self.module = getattr(torch, name)
        self.module_key = f"torch.{name}"
        self.in_modules = sys.modules.get(self.module_key)
        self.removed_by: list[str] = []

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, None, None]:
        yield
        if getattr(self.torch, self.name, None) is not self.module:
            setattr(self.torch, self.name, self.module)
            self.removed_by.append(item.nodeid)
        if self.in_modules is not None and sys.modules.get(self.module_key) is not self.in_modules:
            sys.modules[self.module_key] = self.in_modules

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.removed_by:
            terminalreporter.write_line(
                f"testcurator: {len(self.removed_by)} test(s) removed the backend's device module torch.{self.name}; "
                f"it was put back after each (first: {self.removed_by[0]})")


def guard(config: pytest.Config) -> None:
    """Register the guard when a renamed privateuse1 backend has its device module."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    name = torch._C._get_privateuse1_backend_name()
    if name not in ("privateuseone", "privateuse1") and hasattr(torch, name):
        config.pluginmanager.register(BackendGuard(torch, name), "testcurator-backend-guard")
