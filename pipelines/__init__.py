"""testcurator.pipelines: the LangGraph graph and the workflows built on the stages.

The nightly graph (``nightly.py``, its state ``state.py``, its run context ``context.py``,
its run directory ``store.py``, the work behind its nodes ``steps.py``, starting and
resuming it ``run.py``), emission of configs (``emit.py``) and the report (``report.py``);
the workflows: ``upgrade`` (``upgrade*.py``), ``enable-op`` (``enable_op*.py``), refine from
results made elsewhere (``rebucket.py``), and importing/exporting other teams' skip lists
(``importers.py``, ``exporters.py``, ``skiplist_readers.py``).

Layer: below cli only. May import ``testcurator.agents``, ``memory``, ``runner``,
``plugin``, ``config``, ``prompts`` and the core modules; never ``cli``. The workflows
beside the nightly graph do not import each other.
"""
