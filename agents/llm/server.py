"""The ``llm serve`` process: llama-cpp-python's OpenAI-compatible server, whose greedy
grammar-constrained sampling matches the model's own pick first (:mod:`.grammar_first`).

Run as ``python -m testcurator.agents.llm.server`` with llama-cpp-python's server options
(:meth:`testcurator.agents.llm.local.LocalServer.command`). The server's model loader builds
``llama_cpp.Llama`` by name when it loads the model, so naming :class:`GrammarFirstLlama`
there, in this process only, is all it takes; answers are the same token for token.
"""

from __future__ import annotations


def main() -> None:
    import llama_cpp
    from llama_cpp.server.__main__ import main as serve
    from testcurator.agents.llm.grammar_first import GrammarFirstLlama

    llama_cpp.Llama = GrammarFirstLlama  # type: ignore[misc]
    serve()


if __name__ == "__main__":
    main()
