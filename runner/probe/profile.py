"""Probe a backend for its profile: the checks of runner/probe/checks.py, crash-isolated.

:func:`probe_profile` runs the checks in order in ``python -m
testcurator.runner.probe.profile_worker``. A young backend crashes (SIGSEGV in a kernel, an
abort, a C++ recursion that overflows the stack) or hangs on some of them; such a check is
the one that was started and has no result: it is ``crash`` (the signal, and the last line
the process printed under it) or ``timeout`` (no result within the limit: the worker is
killed), and the remaining checks go on in a new worker. The worker protocol and its
watchdog are the op probe's (runner/probe/replay.py), so both behave alike.

The backend not importing, or importing without registering a privateuse1 device, is bad
input (the user named the wrong module), not a finding about a check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

from testcurator.config.profile_write import CheckOutcome
from testcurator.errors import BadInputError, ExecutionError
from testcurator.runner.probe.replay import STARTUP_TIMEOUT, describe_exit, log_tail, read_lines, watch_worker
from testcurator.runner.probe.checks import CHECKS, MAX_MESSAGE
from testcurator.runner.probe.profile_worker import MARK

WORKER = "testcurator.runner.probe.profile_worker"


@dataclass(frozen=True)
class ProfileProbeSpec:
    """What to probe and how: the backend (``MODULE[:FUNCTION]``), where it imports from."""

    backend: str
    check_timeout: float  # seconds a check may run without a result (0: no limit)
    python_path: Sequence[Path] = ()
    cwd: Path = Path(".")
    startup_timeout: float = STARTUP_TIMEOUT  # a backend may build its extension on first import


@dataclass(frozen=True)
class ProfileProbe:
    """What probing found: the device's name, each check's outcome (in run order)."""

    device: str
    torch_version: str
    outcomes: Sequence[CheckOutcome]
    workers: int
    seconds: float


def probe_profile(spec: ProfileProbeSpec, checks: Sequence[str] = tuple(CHECKS),
                  say: Callable[[CheckOutcome], None] = lambda _: None) -> ProfileProbe:
    """Run ``checks`` (keys of CHECKS) on the backend's device; ``say`` hears each outcome."""
    started = time.monotonic()
    results: dict[str, CheckOutcome] = {}
    ready: dict[str, str] = {}
    todo = list(checks)
    workers = 0
    with TemporaryDirectory(prefix="testcurator-profile-") as tmp:
        while todo:
            workers += 1
            info, done = _run_worker(todo, spec, Path(tmp), workers)
            ready = ready or info
            for outcome in done:
                results[outcome.key] = outcome
                say(outcome)
            todo = [k for k in todo if k not in results]
    return ProfileProbe(ready["device"], ready["torch"], [results[k] for k in checks if k in results], workers,
                        time.monotonic() - started)


def _env(spec: ProfileProbeSpec) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(p) for p in spec.python_path] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _run_worker(todo: Sequence[str], spec: ProfileProbeSpec, tmp: Path,
                n: int) -> tuple[dict[str, str], list[CheckOutcome]]:
    """One worker's ``ready`` info and outcomes: its results, and the check it died under."""
    src, out, log = tmp / f"in-{n}.json", tmp / f"out-{n}.jsonl", tmp / f"log-{n}.txt"
    src.write_text(json.dumps({"backend": spec.backend, "checks": list(todo)}), "utf-8")
    with log.open("w", encoding="utf-8") as handle:
        proc = subprocess.Popen([sys.executable, "-m", WORKER, str(src), str(out)], cwd=spec.cwd, env=_env(spec),
                                stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT)
        hung = watch_worker(proc, out, spec.check_timeout, spec.startup_timeout)
    ended = time.time()
    lines = read_lines(out)
    errors = [d["setup_error"] for d in lines if "setup_error" in d]
    if errors:
        raise BadInputError(errors[0])
    info = next((d["ready"] for d in lines if "ready" in d), None)
    if info is None:
        why = (f"did not finish importing within {spec.startup_timeout:g} s" if hung
               else f"killed the process while importing ({describe_exit(proc.returncode)})")
        raise BadInputError(f"backend module {spec.backend!r} {why}: {log_tail(log)}".strip())
    done = [_outcome(d["check"], d["status"], d["error"], d["seconds"]) for d in lines if "check" in d]
    finished = {o.key for o in done}
    culprit = next((d for d in lines if "start" in d and d["start"] not in finished), None)
    if culprit is not None:
        seconds = max(ended - culprit.get("at", ended), 0.0)
        if hung:
            done.append(_outcome(culprit["start"], "timeout", f"no result after {spec.check_timeout:g} s: "
                                 "the probe process was killed", seconds))
        else:
            words = last_words(log)
            done.append(_outcome(culprit["start"], "crash", f"crashed the probe process "
                                 f"({describe_exit(proc.returncode)}){': ' + words if words else ''}", seconds))
    elif len(finished) < len(todo):
        raise ExecutionError(f"the profile probe worker ended ({describe_exit(proc.returncode)}) between checks: "
                             f"{log_tail(log)}")
    return info, done


def _outcome(key: str, status: str, error: str, seconds: float) -> CheckOutcome:
    kind, _, name = key.partition(":")
    return CheckOutcome(kind, name, status, error, round(seconds, 3))


def last_words(log: Path) -> str:
    """The last line the worker printed under the check it died in, unless it is part of a
    traceback (faulthandler's, Python's): a crash is worth one line, never a stack."""
    text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    after = text.rpartition(MARK)[2].splitlines()[1:]  # the marker's own line names the check
    lines = [line.strip() for line in after if line.strip()]
    for line in reversed(lines):
        if not line.startswith(("File ", "Traceback", "Current thread", "Thread 0x", "Fatal Python error", "<")):
            return line[:MAX_MESSAGE]
    return ""
