"""testcurator: curate PyTorch's upstream test suite for out-of-tree backends.

The package is assembled from the repository's top-level folders (see pyproject.toml):
``testcurator.config`` (the YAML config, the artifact of record), ``testcurator.plugin``
(the pytest plugin that applies it), ``testcurator.cli`` (the ``testcurator`` command),
``testcurator.memory``, ``testcurator.agents``, ``testcurator.pipelines``,
``testcurator.runner`` and ``testcurator.prompts``.
"""

from __future__ import annotations

__version__ = "0.1.0"
