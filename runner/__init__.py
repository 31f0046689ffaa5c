"""testcurator.runner: pytest in subprocesses, and what comes out of them.

The one builder of pytest command lines and the run specification (``command``, split by
``partition``), the crash- and hang-surviving executor (``execute``, ``eventlog``), whether
a process really ran what it was given (``reconcile``) and whether the run held
(``verdict``), collection for the importers (``collect``), the run manifest (``manifest``,
``provenance``), progress (``progress``, ``ticker``), the backend import check
(``preflight``) and a pytest started before its arguments are known (``warm``).

Subpackages: ``results/`` (records, failure classes, JUnit), ``shards/`` (sharded runs,
executors and their registry, merge, durations) and ``probe/`` (the call replay and the
``profile init`` probe, in workers that survive crashes and hangs). Shards and the probe
build on results; results import neither, and shards and probe not each other.

Layer: above plugin. May import ``testcurator.plugin``, ``config`` and the core modules;
never ``memory``, ``agents``, ``pipelines`` or ``cli``.
"""
