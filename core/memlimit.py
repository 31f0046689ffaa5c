"""A per-test memory limit for the process that runs tests (``--curate-memory-limit``).

While a test runs, the process's data (``RLIMIT_DATA``: heap and private writable mappings,
on Linux within a few tens of MB of its RSS for a test process) may grow by at most the
limit over what it held when the test started; between tests the soft limit goes back to
the one before. An allocation past it fails inside the test (torch's CPU allocator: "can't
allocate memory", Python's ``MemoryError``), so the test fails and the process goes on; a
child forked for the test (plugin/isolate.py) arms its own, since the process it is forked from
(a zygote forked before the first test) holds none. The failure's text gets
:data:`~testcurator.vocab.MEMORY_LIMIT_LINE` put first, which the runner classifies
``memory_limit``: the test's own need, the same on every attempt.

Why: on OpenReg's corpus one upstream gradient check (test_fn_gradgrad of grid_sampler_3d in
float64, an op upstream runs on MPS only) grew its process to 2.2 GB before the 300 s timeout
ended it, and took the run's summed memory past 4 GB. Relative to the test's start, not
absolute: a worker holds 300 MB to 1.1 GB after collection, by what its files import.

What it counts is address space, not residence: a thread's stack counts whole (8 MB). A first
backward on OpenReg starts the autograd engine's device threads, 130 of them, 1 GB of stacks
barely resident: under a limit of 1,024 MB that start failed ("Resource temporarily
unavailable"). Under 2,048 MB the grid_sampler_3d check above, forked, ended after 144 s at
1,877 MB RSS, and as a SIGSEGV: OpenReg does not survive every failed allocation, so there it
is recorded ``crashed`` (contained in its fork), not ``memory_limit``.

Linux only (``/proc/self/status``; the ``resource`` module is imported where the limit is
set): elsewhere the option applies no limit.
"""

from __future__ import annotations

import re

from testcurator.vocab import MEMORY_LIMIT_LINE

#: What an allocation that failed says: torch's CPU allocator, errno 12, Python.
ALLOC_FAILED = re.compile(r"can't allocate memory|Cannot allocate memory|\bMemoryError\b")


class MemoryLimit:
    """RLIMIT_DATA's soft limit around one test at a time, ``mb`` above the process's data."""

    def __init__(self, mb: float) -> None:
        self.mb = mb
        self.held_mb: int | None = None  # what the process held when the running test started
        self.soft: int | None = None  # the soft limit before, put back between tests

    def arm(self) -> None:
        held = data_bytes()
        if held is None:
            return
        import resource

        self.soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        soft = held + int(self.mb * 2**20)
        resource.setrlimit(resource.RLIMIT_DATA, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
        self.held_mb = held // 2**20

    def disarm(self) -> None:
        if self.soft is None:
            return
        import resource

        resource.setrlimit(resource.RLIMIT_DATA, (self.soft, resource.getrlimit(resource.RLIMIT_DATA)[1]))

    def note(self, text: str) -> str:
        """``text`` under :data:`MEMORY_LIMIT_LINE` when it is an allocation that failed."""
        if self.held_mb is None or not ALLOC_FAILED.search(text):
            return text
        return (f"{MEMORY_LIMIT_LINE} (it may add {self.mb:g} MB to what its process held when it started; "
                f"--curate-memory-limit)\n{text}")


def data_bytes() -> int | None:
    """The process's data (``VmData``), or None where /proc does not say."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None
