"""Where shards run: one protocol and the local executor (default); runner/shards/registry.py
names them all.

An executor runs a list of :class:`Job` s (a module-level function and its picklable
argument) and returns their results in order. The contract every executor keeps:

- a job that fails for a reason outside the tests (:class:`ExecutionError`: pytest could
  not start, its output was cut; or, on Ray, the worker or node running it died) runs
  once more; a job that fails twice is an **infrastructure failure** of the run
  (:class:`ShardFailedError`, exit code 3), never a test failure;
- test failures are not job failures: they are records in the job's result.

``local`` runs the jobs one after the other in this process (each pytest still uses its
``-n`` workers); ``ray`` (``runner/shards/ray_executor.py``, the ``testcurator[ray]`` extra) runs
each job as a Ray task that asks for the backend's device as a custom resource.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from testcurator.errors import ExecutionError

ATTEMPTS = 2  # a job that fails twice is an infrastructure failure
Say = Callable[[str], None]


class ShardFailedError(ExecutionError):
    """A job failed on every attempt: the run's infrastructure failed, not its tests."""

    def __init__(self, failures: Sequence[tuple[str, str]]) -> None:
        self.failures = list(failures)
        lines = "\n".join(f"  {label}: {why}" for label, why in self.failures)
        super().__init__(f"{len(self.failures)} shard(s) failed {ATTEMPTS} times (infrastructure failure, "
                         f"not a test failure):\n{lines}")


@dataclass(frozen=True)
class Job:
    """One shard's work: ``fn(arg)`` (``fn`` at module level, so a remote worker imports it)."""

    label: str
    fn: Callable[[Any], Any]
    arg: Any


@dataclass(frozen=True)
class ExecutorOptions:
    """What an executor needs: custom resources per job (e.g. ``{"curatedev": 1}``), an
    optional cluster address (else ``RAY_ADDRESS``, else a local cluster), CPUs per job."""

    resources: Mapping[str, float] = field(default_factory=dict)
    address: str | None = None
    cpus_per_job: float = 1.0
    say: Say = field(default=lambda message: None, compare=False)


class Executor(Protocol):
    name: str

    def run(self, jobs: Sequence[Job]) -> list[Any]:
        """Every job's result, in order; raises ShardFailedError after ATTEMPTS failures."""
        ...


def _quiet(message: str) -> None:
    return None


class LocalExecutor:
    """Jobs one after the other, in this process."""

    name = "local"

    def __init__(self, options: ExecutorOptions | None = None) -> None:
        self.say = options.say if options else _quiet

    def run(self, jobs: Sequence[Job]) -> list[Any]:
        results: list[Any] = []
        failures: list[tuple[str, str]] = []
        for job in jobs:
            for attempt in range(1, ATTEMPTS + 1):
                try:
                    results.append(job.fn(job.arg))
                    break
                except ExecutionError as exc:
                    self.say(f"{job.label}: attempt {attempt} failed: {exc}")
                    if attempt == ATTEMPTS:
                        failures.append((job.label, str(exc).splitlines()[0]))
        if failures:
            raise ShardFailedError(failures)
        return results
