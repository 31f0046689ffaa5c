"""testcurator.memory: stage 2, what is known about the upstream tests and the backend's source.

The static index of test files (tree-sitter: ``index.py``, ``collect.py``), its store
(``store.py``), summaries and embeddings (``summaries.py``, ``embeddings.py``), the query
API (``api.py``), the test-to-op map (``opmap.py``), backend op discovery from its C++ and
Python source (``discover.py``), and the memory stage itself (``stage.py``: index, static
collection, CPU op capture, full or delta), which hands the bucket stage typed evidence
(``evidence.py``). The memory of runs (``history.py``: each run's identity and per-instance
outcomes, night after night) and the digests that say what a run ran (``run_identity.py``).

Layer: above runner. May import ``testcurator.runner``, ``plugin``, ``config`` and the
core modules; never ``agents``, ``pipelines`` or ``cli``.
"""
