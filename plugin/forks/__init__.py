"""testcurator.plugin.forks: the processes that run a pytest process's tests for it, forked
from its collected session.

plugin/isolate.py says why tests run outside the process that collected them. The processes:

- The **zygote**, forked before the first test; it runs nothing itself. On a request (a JSON
  line in one pipe; its answers, lines, come out of another) it forks:
  - ``{"item", "next", "out", "fault"}``: a **child** that runs one test (``--curate-isolate``),
    writes its reports to ``out`` and ends; the zygote says the child's pid, reaps it and says
    its wait status;
  - ``{"cell", "fault"}``: a **cell**, a child that runs test after test, each on a request over
    the Unix socket at ``cell``, until told its test is its last or it dies
    (``--curate-recycle``); the zygote says its pid and does not wait for it;
  - ``{"reap"}``: not a fork; the wait status of the cell of that pid, once it ended.
- A **cell** answers each test with its reports and with the private memory it holds
  (``Private_Clean`` and ``Private_Dirty`` of ``/proc/self/smaps_rollup``: what it allocated
  and what of its parent's pages it wrote to), read once a second (:data:`MEASURE_EVERY`) or
  sooner when its resident memory grew by :data:`GROWN_MB`: the read walks the process's pages.
  It is the same process from test to test, so module and class fixtures are set up once, as
  in a plain pytest process, and a backward's autograd threads start in it, never in the zygote.

Why cells: a process that runs thousands of tests keeps some of what each leaves behind
(caches, the allocator's pools, leaks). On OpenReg's corpus verification one xdist worker grew
from 528 MB to 4,792 MB over about 4,000 gradient tests, and the run's summed memory stayed
over 4 GB for 35 minutes; the per-test limit (memlimit.py) bounds what one test adds, not what
a process accumulates. A cell that holds more than the limit is told that its next test is its
last (it tears every fixture down after it, as pytest does after a session's last test) and
the next test starts a fresh one, forked from the zygote: the collected session's memory, not
the accumulated one. A cell that dies (a crash, a timeout) ends one test, and the next starts
a new cell: a fork, where an xdist worker's death costs a new worker and a whole collection.

A child and a cell run torch on one intra-op thread, their messages are plain dicts as xdist
serializes reports (pickled: a skip's ``(path, line, reason)`` stays a tuple), and they die with
their parent (``PR_SET_PDEATHSIG``), which dies with the pytest process. Linux only.

``serve.py`` is what runs in the forked processes (the zygote's loop, a child's test, a
cell's loop, their messages and memory readings, and the teardown to a given test's fixtures
that a cell and the pytest process both do); ``handles.py`` the pytest process's end of
them (:class:`~testcurator.plugin.forks.handles.Zygote`, :class:`~testcurator.plugin.forks.handles.Cell`,
the report of a test whose process died). Used by ``plugin/isolate.py``; the runner reads
:func:`~testcurator.plugin.forks.handles.report_died`.

Layer: part of the plugin; may import the core modules and pytest only.
"""
