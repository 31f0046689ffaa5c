"""testcurator: curate PyTorch's upstream test suite for out-of-tree backends.

The package is assembled from the repository's top-level folders (see pyproject.toml).
This folder (``core/``) holds the modules every layer may use and that import nothing else
of testcurator: ``errors`` (one base exception, exit codes), ``files`` (atomic writes), ``installed`` (torch's
version and dtype names, read without importing it), ``lock`` (one run at a time per state directory and ``--out``),
``memlimit`` (a per-test memory limit of the process running tests), ``names`` (instantiated
name -> device-generic identity) and ``vocab`` (modes, outcomes, failure classes, the test
key, op names).

The layers, lowest first; a package imports only from the layers below it (checked by
import-linter, pyproject.toml ``[tool.importlinter]``): core -> ``config`` (``prompts``
beside it) -> ``plugin`` -> ``runner`` -> ``memory`` -> ``agents`` -> ``pipelines`` ->
``cli``.
"""

from __future__ import annotations

__version__ = "0.1.0"
