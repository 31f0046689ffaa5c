"""testcurator.pipelines.migrate: other teams' skip lists, in and out.

``readers`` (the skip-list formats read), ``match`` (an entry to the tests it names),
``importers`` (``testcurator import``), ``report`` (what an import kept and dropped) and
``exporters`` (a curated config written back as a skip list).

May import the modules of ``testcurator.pipelines`` beside it and every layer below; never
the other workflows or ``cli``.
"""
