"""The executor registry: ``--executor NAME`` -> an :class:`~testcurator.runner.shards.executors.Executor`.

Apart from the protocol and the local executor (runner/shards/executors.py), which the Ray
executor builds on, so that no executor imports the module that imports it.
"""

from __future__ import annotations

from collections.abc import Callable

from testcurator.errors import BadInputError
from testcurator.runner.shards.executors import Executor, ExecutorOptions, LocalExecutor


def _ray(options: ExecutorOptions) -> Executor:
    # Imported when asked for: Ray is an optional extra (testcurator[ray]).
    from testcurator.runner.shards.ray_executor import RayExecutor

    return RayExecutor(options)


#: Explicit registry: ``--executor NAME``.
EXECUTORS: dict[str, Callable[[ExecutorOptions], Executor]] = {"local": LocalExecutor, "ray": _ray}


def make_executor(name: str, options: ExecutorOptions | None = None) -> Executor:
    if name not in EXECUTORS:
        raise BadInputError(f"--executor {name!r}: expected one of {', '.join(EXECUTORS)}")
    return EXECUTORS[name](options or ExecutorOptions())
