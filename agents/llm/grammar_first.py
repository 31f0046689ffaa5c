"""Greedy grammar-constrained sampling that checks the model's own choice first.

llama-cpp-python's sampler chain puts the grammar before the greedy pick: every token of the
vocabulary is matched against the grammar at every step. Gemma 3's vocabulary has 262,144
tokens, so on this machine the grammar cost three times what the model did (40.9 tokens/s
without a grammar, 13.7 with the answer schema's; one core, measured). llama.cpp's own
server avoids that (``common_sampler_sample``): it takes the unconstrained pick and
matches only that token; the whole vocabulary is matched only when the pick is refused.

For greedy decoding this is exact, not an approximation: the highest-scoring token of the
vocabulary, when the grammar allows it, is also the highest-scoring allowed one, and
llama.cpp's greedy sampler breaks ties on the first index as ``numpy.argmax`` does. So
:class:`GrammarFirstLlama` changes only the greedy chain with a grammar (temperature 0,
which the LLM brain asks for); every other chain is llama-cpp-python's own.

Used only inside the ``llm serve`` process (:mod:`testcurator.agents.llm.server`). Written
against llama-cpp-python 0.3.36's ``Llama._init_sampler`` and ``LlamaSampler``
(``pyproject.toml`` bounds the version).
"""

from __future__ import annotations

import ctypes
from typing import Any

import llama_cpp
import numpy as np
from llama_cpp import _internals

# How many of the best tokens are matched (in one call) before the grammar is applied to all.
SHORTLIST = 2048
_TOKEN = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)], align=True)


class GrammarFirstSampler:
    """A chain stage that stands where the grammar stood: it owns the grammar sampler,
    matches the unconstrained best token first, and lets the grammar prune the whole
    candidate array only when that token is refused. Accept and reset reach the grammar."""

    def __init__(self, vocab: Any, grammar: str, root: str) -> None:
        self.grammar = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), root.encode("utf-8"))
        if not self.grammar:
            raise ValueError("llama.cpp refused the grammar")
        self.checked = 0
        self.refused = 0
        # One scratch array for the matches: the model's pick alone, or the shortlist.
        self._short = (llama_cpp.llama_token_data * SHORTLIST)()
        self._short_array = llama_cpp.llama_token_data_array(self._short, SHORTLIST, -1, False)
        # The callbacks must outlive the chain: keep references on self.
        self._apply = llama_cpp.llama_sampler_i_apply(lambda _smpl, cur_p: self.apply(cur_p.contents))
        self._accept = llama_cpp.llama_sampler_i_accept(lambda _smpl, token: self.accept(token))
        self._reset = llama_cpp.llama_sampler_i_reset(lambda _smpl: llama_cpp.llama_sampler_reset(self.grammar))
        iface = llama_cpp.llama_sampler_i()
        iface.name = llama_cpp.llama_sampler_i_name(0)
        iface.accept = self._accept
        iface.apply = self._apply
        iface.reset = self._reset
        iface.clone = llama_cpp.llama_sampler_i_clone(0)
        iface.free = llama_cpp.llama_sampler_i_free(0)
        self._iface = iface
        self.sampler = llama_cpp.llama_sampler()
        self.sampler.iface = ctypes.pointer(iface)
        self.sampler.ctx = None

    def _match(self, candidates: np.ndarray) -> np.ndarray:
        """Which of ``candidates`` (at most :data:`SHORTLIST`) the grammar, in its current
        state, allows next: one call over the scratch array, which it marks in place."""
        scratch = np.frombuffer(self._short, dtype=_TOKEN, count=len(candidates))
        scratch[:] = candidates
        self._short_array.size, self._short_array.selected, self._short_array.sorted = len(candidates), -1, False
        llama_cpp.llama_sampler_apply(self.grammar, ctypes.byref(self._short_array))
        return np.isfinite(scratch["logit"])

    def apply(self, cur_p: Any) -> None:
        size = int(cur_p.size)
        if size == 0:
            return
        buf = (ctypes.c_char * (size * _TOKEN.itemsize)).from_address(ctypes.addressof(cur_p.data.contents))
        tokens = np.frombuffer(buf, dtype=_TOKEN, count=size)
        self.checked += 1
        logits = tokens["logit"]
        best = int(np.argmax(logits))
        if self._match(tokens[best:best + 1])[0]:
            return  # greedy picks this same token next: nothing to prune
        choice = self._next_allowed(tokens)
        if choice is None:
            self.refused += 1
            llama_cpp.llama_sampler_apply(self.grammar, ctypes.pointer(cur_p))
        else:  # leave greedy nothing else to pick
            tokens[0] = tokens[choice]
            cur_p.size = 1

    def _next_allowed(self, tokens: np.ndarray) -> int | None:
        """The best allowed token among the :data:`SHORTLIST` best, ties to the lower index
        as greedy breaks them; None when none of them is allowed, or when a token left out
        of the shortlist could tie with the one found (then the grammar decides)."""
        logits = tokens["logit"]
        if len(logits) <= SHORTLIST:
            return None
        top = np.argpartition(-logits, SHORTLIST)[:SHORTLIST]
        order = top[np.lexsort((top, -logits[top]))]
        allowed = np.flatnonzero(self._match(tokens[order]))
        if not len(allowed) or logits[order[allowed[0]]] <= logits[order[-1]]:
            return None
        return int(order[allowed[0]])

    def accept(self, token: int) -> None:
        llama_cpp.llama_sampler_accept(self.grammar, token)

    def free(self) -> None:
        if self.grammar:
            llama_cpp.llama_sampler_free(self.grammar)
            self.grammar = None


class GrammarFirstLlama(llama_cpp.Llama):
    """``Llama`` whose greedy chain with a grammar matches the model's pick first."""

    def _init_sampler(self, *args: Any, **kwargs: Any) -> _internals.LlamaSampler:
        grammar = kwargs.get("grammar")
        temp = kwargs.get("temp", 0.80)
        if grammar is None or temp != 0.0 or args or kwargs.get("logits_processor") is not None \
                or kwargs.get("mirostat_mode", 0):
            return super()._init_sampler(*args, **kwargs)
        # The same chain as llama-cpp-python's for temperature 0: penalties, grammar, greedy.
        chain = _internals.LlamaSampler()
        chain.add_penalties(n_vocab=self._n_vocab, penalty_last_n=self.last_n_tokens_size,
                            penalty_repeat=kwargs.get("repeat_penalty", 1.0),
                            penalty_freq=kwargs.get("frequency_penalty", 0.0),
                            penalty_present=kwargs.get("presence_penalty", 0.0))
        stage = GrammarFirstSampler(self._model.vocab, grammar._grammar, grammar._root)
        llama_cpp.llama_sampler_chain_add(chain.sampler, ctypes.pointer(stage.sampler))
        # The chain must not free a stage it does not own; LlamaSampler removes the ones
        # listed here before it frees itself, and the stage frees its grammar after.
        chain.custom_samplers.append((llama_cpp.llama_sampler_chain_n(chain.sampler) - 1, stage))
        chain._exit_stack.callback(stage.free)
        chain.add_greedy()
        return chain
