"""testcurator.agents.llm: the LLM brain, which asks an OpenAI-compatible model.

``brain`` (the Brain: batches, rails, fallback to the offline brain), ``stages`` (what each
stage asks and how an answer becomes a decision), ``answers`` (the pydantic answer models),
``client`` (structured requests: schema, validation, re-asks), ``negotiate`` (which
structured-output mode an endpoint takes, and cut-off answers), ``transport`` (streaming
with an idle timeout, retries, "down"), ``budget`` (the context window and the time budget),
``cache`` (answers on disk), ``summaries`` (a file's tests summarised once), ``local``
(``llm serve``: llama-cpp-python's server with the packaged model), ``server`` and
``grammar_first`` (that server's process, whose greedy grammar sampling matches the
model's pick first; they import llama-cpp-python and run only in that process).

May import ``testcurator.agents.brain``, ``decision`` and ``rails``, ``prompts``,
``memory``, ``runner``, ``config`` and the core modules; never ``agents.offline`` (the
registry, ``agents.registry``, hands it the offline brain as its fallback).
"""
