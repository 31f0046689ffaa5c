"""testcurator.agents: the stage agents and the brains they ask.

- Stage agents: ``scope`` (stage 1: which folders and files to analyse), ``bucket`` (stage
  3: one request per test, from memory's evidence), ``refine`` (stage 4: one request per
  test, from execution records). Each builds requests and asks a brain.
- The brain role: the ``Brain`` Protocol and the value types every brain reads and returns
  (``brain``: requests, contexts, settings, usage; ``decision``: the frozen decision
  records), the rails that check every answer (``rails``) and the registry that makes a
  brain by name (``registry``).
- The brains: ``offline/`` (deterministic rules over evidence) and ``llm/`` (an
  OpenAI-compatible model, falling back to the offline brain). They never import each
  other; the registry hands the LLM brain its fallback.

Layer: above memory. May import ``testcurator.memory``, ``runner``, ``plugin``, ``config``,
``prompts`` and the core modules (``errors``, ``files``, ``names``, ``vocab``); never
``pipelines`` or ``cli``. The offline brain imports neither the LLM brain nor prompts.
"""
