"""testcurator.agents.offline: the offline brain, deterministic rules over evidence.

``brain`` (the Brain, tabling the rules), one module per stage's rules (``scope``,
``bucket``, ``refine``), the probe rule (``probe``) and what they share (``rules``: the
preference grammar, hooks and features, record builders).

May import ``testcurator.agents.brain`` and ``decision``, ``memory``, ``config`` and the
core modules; never ``agents.llm`` or ``prompts``: the same inputs give the same records.
"""
