"""testcurator.agents: the stage agents and the brains they ask.

- Stage agents: ``scope.py`` (stage 1: which folders and files to analyse), ``bucket.py``
  (stage 3: one request per test, from memory's evidence), ``refine.py`` (stage 4: one
  request per test, from execution records). Each builds requests and asks a brain.
- Brains, behind one Protocol and registry (``brain.py``): the offline evidence brain
  (``offline.py`` and its rules in ``offline_scope/_bucket/_refine/_rules.py``) and the LLM
  brain (``llm.py``, ``llm_client.py``), checked by the rails (``rails.py``); what they
  answer is a frozen decision record (``decision.py``).

Layer: above memory. May import ``testcurator.memory``, ``runner``, ``plugin``, ``config``,
``prompts`` and the core modules (``errors``, ``files``, ``names``, ``vocab``); never
``pipelines`` or ``cli``. The offline brain imports neither the LLM client nor prompts.
"""
