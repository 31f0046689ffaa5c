"""testcurator.runner.results: what comes out of a pytest process, as records.

``records`` (one record per test variant, JSON lines), ``classify`` (a failure's class from
its exception), ``junit`` and ``junit_write`` (JUnit XML read and written) and ``ingest``
(results made elsewhere, read back).

May import ``testcurator.plugin``, ``config`` and the core modules; nothing else in
``runner``.
"""
