"""testcurator.pipelines: the LangGraph graph and the workflows built on the stages.

What every workflow shares: the run context (``context``), the run directory (``store``),
the brain's stages on one file (``decide``), emission of configs (``emit``, checked before
disk by ``emit_guard``), the probe step (``probe``), the report (``report``: its data;
``report_md``: report.md; the brains' comparison ``brain_report``, reasons checked against
results ``reason_check``), night after night (``nights/``: the run's identity, the standing configs' assessment, "since the previous
run", the memory of runs, ``accept`` and ``history``), the gap board (``gaps/``), ``eval``
(``evaluate``), validation level 3 (``validate_tree``), tiers (``tiers``), the shard plan
(``shard_plan``) and the generated GitHub workflow (``ci_github``).

The workflows, one subpackage or module each: the nightly graph (``nightly/``),
``upgrade`` (``upgrade/``), ``enable-op`` (``enable_op/``), importing and exporting other
teams' skip lists (``migrate/``) and refine from results made elsewhere (``rebucket``).

Layer: below cli only. May import ``testcurator.agents``, ``memory``, ``runner``,
``plugin``, ``config``, ``prompts`` and the core modules; never ``cli``. The workflows
beside the nightly graph do not import each other (``upgrade`` reruns the nightly graph).
"""
