"""testcurator.runner: pytest in subprocesses, and what comes out of them.

The one builder of pytest command lines and the run specification (``command.py``), the
crash- and hang-surviving executor (``execute.py``, ``eventlog.py``), collection for the
importers (``collect.py``), failure classification (``classify.py``), result records and
their formats (``records.py``, ``junit.py``, ``junit_write.py``, ``ingest.py``), the run
manifest (``manifest.py``), progress (``progress.py``), a pytest started before its
arguments are known, so its imports overlap other work (``warm.py``), and the probe behind
``profile init``: a check per dtype and hook (``profile_checks.py``), run in workers that
survive crashes and hangs (``profile_probe.py``, ``profile_probe_worker.py``).

Layer: above plugin. May import ``testcurator.plugin``, ``config`` and the core modules;
never ``memory``, ``agents``, ``pipelines`` or ``cli``.
"""
