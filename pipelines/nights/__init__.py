"""testcurator.pipelines.nights: night after night, a nightly judged against what it stood for.

The pieces every workflow that runs night after night shares: the run's identity
(``identity``: taken when a run starts, recorded when it ends), the assessment of a night
(``assess``: regressions, flaky tests and the standing entries that stay), the night recorded
in the memory of runs and its report section ("since the previous run": ``night``, ``since``)
and the trend page (``chart``).

May import ``testcurator.pipelines.context`` and ``store`` and every layer below
``pipelines``; never the workflows (``nightly``, ``upgrade``, ...), ``report`` or ``cli``.
"""
