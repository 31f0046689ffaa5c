"""Profile checks in their own process: ``python -m testcurator.runner.probe.profile_worker IN OUT``.

IN (JSON): ``{"backend": "pkg.mod" | "pkg.mod:setup", "checks": ["dtype:float32", ...]}``.
The worker imports the backend (calling ``:setup``), reads the device name it registered
(``torch._C._get_privateuse1_backend_name()``) and runs each check of runner/probe/checks.py
on that device. OUT gets JSON lines, each flushed: ``{"ready": {"device", "torch"}}`` once (or
``{"setup_error": text}`` and nothing more), then per check ``{"start": key, "at": epoch seconds}`` and its result
``{"check", "status": "pass"|"fail", "error", "seconds"}``. A check that kills or hangs the
process leaves a ``start`` without a result: the parent (runner/probe/profile.py) records it
as ``crash`` or ``timeout`` and runs the rest in a new worker.

The backend is imported before torch, so a module that does not exist is reported in the
time Python takes to start, not after torch's import.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import IO, Any

from testcurator.runner.probe.checks import CHECKS, CheckFailed, one_line

#: What torch calls privateuse1 until a backend renames it: nothing registered a device.
UNREGISTERED = ("privateuseone", "privateuse1")
#: Written to stderr before each check, so the parent can tell a crash's last words from
#: what earlier checks printed.
MARK = "@@testcurator-profile-check "


def _write(out: IO[str], data: dict[str, Any]) -> None:
    out.write(json.dumps(data, sort_keys=True) + "\n")
    out.flush()


def import_backend(spec: str) -> None:
    """Import ``MODULE`` and call ``FUNCTION()`` of ``MODULE:FUNCTION``, as the test runs do."""
    module_name, _, function = spec.partition(":")
    module = importlib.import_module(module_name)
    if function:
        setup = getattr(module, function, None)
        if not callable(setup):
            raise AttributeError(f"module {module_name!r} has no function {function!r}")
        setup()


def setup(out: IO[str], backend: str) -> str | None:
    """Import the backend and write the ``ready`` (or ``setup_error``) line; the device or None."""
    try:
        import_backend(backend)
    except Exception as exc:  # noqa: BLE001 - the user's module: its error is the message
        _write(out, {"setup_error": f"cannot import backend module {backend!r}: {one_line(exc)}"})
        return None
    import torch

    device = torch._C._get_privateuse1_backend_name()
    if device in UNREGISTERED:
        _write(out, {"setup_error": f"backend module {backend!r} imported, but no privateuse1 device is registered "
                                    f"(torch._C._get_privateuse1_backend_name() is still {device!r}); name the "
                                    "function that registers it as MODULE:FUNCTION"})
        return None
    _write(out, {"ready": {"device": device, "torch": torch.__version__}})
    return device


def run_check(key: str, device: str) -> tuple[str, str]:
    """(status, one-line error) of one check."""
    check = CHECKS.get(key)
    if check is None:
        return "fail", f"no such check: {key}"
    try:
        check(device)
    except CheckFailed as exc:
        return "fail", str(exc)
    except Exception as exc:  # noqa: BLE001 - an unguarded step of a check: still one line
        return "fail", one_line(exc)
    return "pass", ""


def no_core_dumps() -> None:
    """Checks are expected to crash now and then: leave no core file in the user's folder."""
    try:
        import resource
    except ImportError:  # not POSIX
        return
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ValueError, OSError):
        pass


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    no_core_dumps()
    with open(argv[1], "a", encoding="utf-8") as out:
        device = setup(out, spec["backend"])
        if device is None:
            return 0
        for key in spec["checks"]:
            _write(out, {"start": key, "at": time.time()})
            sys.stderr.write(f"\n{MARK}{key}\n")
            sys.stderr.flush()
            started = time.perf_counter()
            status, error = run_check(key, device)
            _write(out, {"check": key, "status": status, "error": error,
                         "seconds": round(time.perf_counter() - started, 3)})
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Every result is on disk: skip the backend's teardown (atexit hooks, threads it started),
    # which can hang or crash at exit and would only make the parent wait.
    os._exit(code)
