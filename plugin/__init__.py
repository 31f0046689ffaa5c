"""testcurator.plugin: the pytest plugins, which run inside pytest processes.

``entry.py`` (the ``pytest11`` entry point and its options), ``curate.py`` (applies a config:
marks, edits, summary), ``capture.py`` (records the aten ops each test dispatches, through the
modes of ``recorder.py``, and with
``compile_capture.py`` those of the graphs it compiles, in the format of ``oprecord.py``),
``events.py`` (crash and hang events for the runner; with ``summary.py``, pytest's failure
summary in linear time in the processes a run starts, and the curate plugin's counts),
``collect.py`` (writes collected items for ``runner/collect.py``); the option extensions
``shard.py``, ``labels.py``, ``tiers.py``, ``only.py`` (``--curate-only``), ``isolate.py``
(``--curate-isolate``, ``--curate-recycle``: tests in processes forked from the collected
session, the ``forks`` package) and what they share, ``optionset.py``; a
collected item's identity, which they all select or record by, ``identity.py``.

Layer: above config. May import ``testcurator.config`` and the core modules only, so a
pytest run loads no pipeline, memory store or brain.
"""
