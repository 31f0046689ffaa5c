"""Replay captured calls on the device, a subprocess per batch (runner/probe/replay_worker.py).

:func:`probe_calls` splits the calls into batches and runs each in a fresh
``python -m testcurator.runner.probe.replay_worker``, ``workers`` of them at once (each
start imports torch and the backend: seconds a process, which two processes pay side by
side). A call that kills the process (a segfault, an abort) or hangs past
``call_timeout`` is the one that was started and has no result: it is
``crash`` (the process's exit or the hang, and its output's tail, as the error), and the
batch's remaining calls go on in a new process. A worker that dies before replaying anything
(the backend does not import) is a setup error, not a finding about any call.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from testcurator.errors import ExecutionError

STARTUP_TIMEOUT = 600.0  # a backend may build its extension on first import
CALL_TIMEOUT = 60.0
BATCH = 1000  # calls per worker process: each start imports torch and the backend (seconds)
TAIL = 600
# How calls are replayed (runner/probe/replay_worker.py): part of the capability table's key, so a
# table filled by older rules is not reused. 2: host calls stay on the host; no autograd. 4: a
# raising twin's message is compared without the tensor type names in it. 5: a writing twin
# (callspec.write_call) checks that the device's view shares its input's memory.
REPLAY_VERSION = 5
NO_EXAMPLE = "no replayable example was recorded on CPU"


@dataclass(frozen=True)
class ProbeResult:
    """What replaying one call on the device found (status: testcurator.vocab.PROBE_STATUSES)."""

    call: str
    status: str
    error: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class ProbeSpec:
    """Where and how to probe: the device, the backend to import, the environment."""

    device: str
    backend: str | None
    env: Mapping[str, str]
    cwd: Path
    call_timeout: float = CALL_TIMEOUT
    batch: int = BATCH
    workers: int = 1  # worker processes at once


def probe_calls(calls: Mapping[str, str | None], spec: ProbeSpec,
                say: Callable[[str], None] = lambda _: None) -> list[ProbeResult]:
    """A result per call of ``calls`` (key -> example; None: ``not_probed``), in key order."""
    results = {k: ProbeResult(k, "not_probed", NO_EXAMPLE)
               for k, v in calls.items() if v is None}
    todo = deque((k, v) for k, v in sorted(calls.items()) if v is not None)
    workers = max(1, min(spec.workers, len(todo)))
    # Equal shares, so that the processes start together and end together.
    size = max(1, min(spec.batch, -(-len(todo) // workers)))
    queue = BatchQueue(todo, size)
    with TemporaryDirectory(prefix="testcurator-probe-") as tmp:

        def work() -> None:
            while (taken := queue.take()) is not None:
                n, batch = taken
                try:
                    done, left = _run_batch(batch, spec, Path(tmp), n)
                except BaseException:
                    queue.fail()  # the others stop after their batch
                    raise
                with queue.lock:
                    results.update({r.call: r for r in done})
                    count = len(results)
                queue.put_back(left)
                say(f"probe: {count} of {len(calls)} calls")

        # Each thread runs until the queue is done; an error (a worker that did not start) is
        # raised here once every thread has stopped.
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="probe") as pool:
            for future in [pool.submit(work) for _ in range(workers)]:
                future.result()
    return [results[k] for k in sorted(results)]


class BatchQueue:
    """The calls still to replay, handed out a batch at a time. A batch cut short by a crash
    puts the calls it did not reach back in front; a worker waits while another's batch is
    out, for what that one may put back."""

    def __init__(self, todo: deque[tuple[str, str]], size: int) -> None:
        self.todo, self.size, self.out, self.runs, self.failed = todo, size, 0, 0, False
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)

    def take(self) -> tuple[int, list[tuple[str, str]]] | None:
        with self.changed:
            while not self.todo and self.out and not self.failed:
                self.changed.wait()
            if not self.todo or self.failed:
                return None
            batch = [self.todo.popleft() for _ in range(min(self.size, len(self.todo)))]
            self.out += 1
            self.runs += 1
            return self.runs, batch

    def put_back(self, left: list[tuple[str, str]]) -> None:
        with self.changed:
            self.todo.extendleft(reversed(left))
            self.out -= 1
            self.changed.notify_all()

    def fail(self) -> None:
        with self.changed:
            self.failed = True
            self.out -= 1
            self.changed.notify_all()


def _run_batch(batch: Sequence[tuple[str, str]], spec: ProbeSpec, tmp: Path,
               n: int) -> tuple[list[ProbeResult], list[tuple[str, str]]]:
    """Results of one worker process, and the calls it did not reach."""
    src, out, log = tmp / f"in-{n}.json", tmp / f"out-{n}.jsonl", tmp / f"log-{n}.txt"
    src.write_text(json.dumps({"device": spec.device, "backend": spec.backend, "calls": list(batch)}), "utf-8")
    env = {**os.environ, **spec.env}
    if spec.workers > 1:
        # Each process would start a thread per core for torch's intra-op work: side by side they
        # fought over the cores (the calls' own time doubled, 3.4 -> 6 to 8 s on the corpus).
        env.setdefault("OMP_NUM_THREADS", "1")
    with log.open("w", encoding="utf-8") as handle:
        proc = subprocess.Popen([sys.executable, "-m", "testcurator.runner.probe.replay_worker", str(src), str(out)],
                                cwd=spec.cwd, env=env, stdout=handle, stderr=subprocess.STDOUT)
        hung = watch_worker(proc, out, spec.call_timeout)
    lines = read_lines(out)
    started = [d["start"] for d in lines if "start" in d]
    done = [ProbeResult(d["call"], d["status"], d["error"], d["seconds"]) for d in lines if "call" in d]
    if not any("ready" in d for d in lines):
        raise ExecutionError(f"the probe worker did not start on {spec.device!r} (exit {proc.returncode}): "
                             f"{log_tail(log)}")
    finished = {r.call for r in done}
    culprit = next((k for k in started if k not in finished), None)
    if culprit is not None:
        why = f"hang: no result after {spec.call_timeout:g}s" if hung else f"the process died ({describe_exit(proc.returncode)})"
        done.append(ProbeResult(culprit, "crash", crash_text(why, log, proc.returncode)))
        finished.add(culprit)
    elif proc.returncode != 0:
        raise ExecutionError(f"the probe worker exited {proc.returncode} between calls: {log_tail(log)}")
    return done, [(k, v) for k, v in batch if k not in finished]


def crash_text(why: str, log: Path, returncode: int | None) -> str:
    """How a worker died, with the line that says so (``Fatal Python error: Segmentation
    fault``), never the log's last characters: those are whatever the call printed before it
    died, a warning cut mid-word as often as not."""
    from testcurator.runner.results.classify import classify

    text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    evidence = classify(text, outcome="crashed", returncode=returncode).evidence
    return f"{why}: {evidence}"[:TAIL] if evidence.startswith("Fatal Python error") else why


def watch_worker(proc: subprocess.Popen[Any], out: Path, call_timeout: float,
                 startup_timeout: float = STARTUP_TIMEOUT) -> bool:
    """Wait for a worker writing JSON lines to ``out``; kill it when a call (or the start)
    goes ``call_timeout`` (``startup_timeout``) seconds without a new line (0: no limit).
    True: killed. Shared with the profile probe (runner/probe/profile.py)."""
    last_size, since = -1, time.monotonic()
    limit = startup_timeout
    while proc.poll() is None:
        size = out.stat().st_size if out.exists() else 0
        if size != last_size:  # progress: a new line (ready, start or result)
            last_size, since = size, time.monotonic()
            limit = startup_timeout if size == 0 else call_timeout
        if limit > 0 and time.monotonic() - since > limit:
            proc.kill()
            proc.wait()
            return True
        time.sleep(0.02)
    return False


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines a worker wrote, up to one its death cut short."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut by the crash
            break
    return out


def describe_exit(code: int | None) -> str:
    """``signal SIGSEGV`` or ``exit 3``: how a worker ended."""
    if code is not None and code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit {code}"


def log_tail(log: Path) -> str:
    """The end of a worker's output (TAIL characters)."""
    text = log.read_text(encoding="utf-8", errors="replace").strip() if log.exists() else ""
    return text[-TAIL:]
