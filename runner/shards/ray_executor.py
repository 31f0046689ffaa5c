"""``--executor ray``: each shard is a Ray task on the cluster that has the device.

The cluster is the one at ``RAY_ADDRESS``; without one, a local single-node cluster is
started for the run (and offers the profile's resources, since this machine is then the
device host; Ray's defaults apply to it, token authentication included, which keeps its
token in ``~/.ray/auth_token`` unless ``RAY_AUTH_MODE`` says otherwise). Each task asks for the backend's device as the custom
resources of the backend profile (``resources: {curatedev: 1}``), so a shard lands only on
a node started with ``ray start --resources '{"curatedev": 1}'``.

A worker or node that dies under a shard has the shard retried by Ray (``max_retries=1``),
and so does a shard that raised :class:`ExecutionError`; a shard that fails twice is an
infrastructure failure (:class:`ShardFailedError`). Every node must see the test tree, the
config and the backend at the same paths as the driver (a shared checkout, or one image),
and have testcurator installed; results travel back as the task's return value.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from testcurator.errors import BadInputError, ExecutionError
from testcurator.runner.shards.executors import ATTEMPTS, ExecutorOptions, Job, ShardFailedError


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise BadInputError("--executor ray needs Ray: pip install 'testcurator[ray]'") from exc
    return ray


# Ray sets OMP_NUM_THREADS in a task's worker to the task's CPUs (1) when it is not set: the
# shard's pytest, started from that worker, would run every test on one intra-op thread, and
# some upstream outcomes follow the thread count (test_native_mha's
# test_multihead_attention_fastpath_for_all_batchfirst fails on CPU with the default and
# passes with 1: the corpus's configs differed from a local run's by that test).
DRIVER_ENV = ("OMP_NUM_THREADS",)


def _call(fn: Any, arg: Any, env: dict[str, str | None]) -> Any:
    """The task body: runs on a Ray worker, with ``env`` as the driver had it (None: unset)."""
    for name, value in env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    return fn(arg)


class RayExecutor:
    name = "ray"

    def __init__(self, options: ExecutorOptions) -> None:
        self.options = options
        self.ray = _import_ray()

    def _connect(self) -> bool:
        """Connect (or start a local cluster); True when this call did it."""
        ray = self.ray
        if ray.is_initialized():
            return False
        address = self.options.address or os.environ.get("RAY_ADDRESS") or None
        common = {"log_to_driver": False, "logging_level": "ERROR", "configure_logging": True}
        try:
            if address:
                ray.init(address=address, **common)
            else:
                ray.init(resources=dict(self.options.resources), include_dashboard=False, **common)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ExecutionError(f"cannot reach the Ray cluster at {address or '(local)'}: {exc}") from exc
        return True

    def _check_resources(self) -> None:
        offered = self.ray.cluster_resources()
        missing = {k: v for k, v in self.options.resources.items() if offered.get(k, 0) < v}
        if missing:
            have = ", ".join(f"{k} {v:g}" for k, v in sorted(offered.items()) if "node:" not in k)
            raise ExecutionError(
                f"no node of the Ray cluster offers {missing} (the cluster has: {have}); start device hosts "
                f"with: ray start --address=HEAD --resources='{{\"{next(iter(missing))}\": 1}}'")

    def run(self, jobs: Sequence[Job]) -> list[Any]:
        ray = self.ray
        started = self._connect()
        try:
            self._check_resources()
            remote = ray.remote(_call)
            driver_env = {name: os.environ.get(name) for name in DRIVER_ENV}
            refs = [
                remote.options(name=job.label, num_cpus=self.options.cpus_per_job,
                               resources=dict(self.options.resources), max_retries=ATTEMPTS - 1,
                               retry_exceptions=[ExecutionError]).remote(job.fn, job.arg, driver_env)
                for job in jobs
            ]
            return self._gather(jobs, refs)
        finally:
            if started:
                ray.shutdown()

    def _gather(self, jobs: Sequence[Job], refs: list[Any]) -> list[Any]:
        results: list[Any] = [None] * len(refs)
        failures: list[tuple[str, str]] = []
        for i, (job, ref) in enumerate(zip(jobs, refs)):
            try:
                results[i] = self.ray.get(ref)
                self.options.say(f"{job.label}: done")
            except self.ray.exceptions.RayError as exc:
                failures.append((job.label, str(exc).strip().splitlines()[0]))
        if failures:
            raise ShardFailedError(failures)
        return results
