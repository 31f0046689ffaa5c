"""LLM-written test summaries in memory (seed 003), and the way back to the offline ones.

With the LLM brain on, the memory stage asks the model for a summary of each distinct test
body (one per content hash), caches it by (content hash, summary prompt hash, model), stores
it in memory (author ``llm:<model>``, shown by ``testcurator memory show``) and re-embeds
what changed. Tests the model did not summarise keep the offline summary (the fallback).
With the offline brain, summaries written by a model are dropped, so the offline brain
always reads the same offline text, whatever ran before.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from testcurator.agents.llm.cache import AnswerCache, digest
from testcurator.memory.api import Memory
from testcurator.memory.store import StoredTest
from testcurator.memory.summaries import reembed
from testcurator.prompts import load_prompt

AUTHOR_PREFIX = "llm:"
SOURCE_LINES = 40


class Summarizer(Protocol):
    """What this module needs of a brain: its cache and model, and batch summaries."""

    @property
    def summary_cache(self) -> AnswerCache: ...

    @property
    def model(self) -> str: ...

    def summarize(self, tests: Sequence[dict[str, Any]]) -> dict[str, str]: ...


def _request(root: Path, test: StoredTest) -> dict[str, Any]:
    try:
        lines = (root / test.path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    source = "\n".join(lines[test.line_start - 1 : min(test.line_end, test.line_start - 1 + SOURCE_LINES)])
    return {"test": test.generic, "file": test.path, "decorators": [d.text() for d in test.decorators], "source": source}


def write_llm_summaries(brain: Summarizer, state_dir: Path, root: Path, files: Sequence[str], *, embed: bool) -> dict[str, int]:
    """Summaries by the model for every test body of ``files``; figures for memory.json."""
    prompt = load_prompt("summary")
    author = f"{AUTHOR_PREFIX}{brain.model}"
    with Memory.open(state_dir) as memory:
        firsts: dict[str, StoredTest] = {}
        for test in sorted((t for rel in files for t in memory.tests_in_file(rel)), key=lambda t: (t.path, t.generic)):
            firsts.setdefault(test.content_hash, test)
        key = {h: digest("summary", h, prompt.hash, brain.model) for h in firsts}
        texts = {h: text for h in firsts if (text := brain.summary_cache.get(key[h]))}
        todo = [t for h, t in firsts.items() if h not in texts]
        asked = len(todo)
        for rel in sorted({t.path for t in todo}):  # one file at a time: generic names are unique in a file
            mine = [t for t in todo if t.path == rel]
            answers = brain.summarize([_request(root, t) for t in mine])
            for test in mine:
                if test.generic in answers:
                    texts[test.content_hash] = answers[test.generic]
                    brain.summary_cache.put(key[test.content_hash], answers[test.generic])
        changed = [h for h, text in texts.items() if (firsts[h].summary, firsts[h].summary_author) != (text, author)]
        for h in changed:
            memory.set_summary(h, texts[h], author)
        if embed:
            reembed(state_dir, memory.store, changed)
    return {"llm_summaries": len(texts), "llm_summaries_asked": asked, "offline_summaries": len(firsts) - len(texts)}


def drop_llm_summaries(state_dir: Path, *, embed: bool) -> int:
    """Back to the offline summaries everywhere; returns how many were dropped."""
    with Memory.open(state_dir) as memory:
        hashes = memory.store.summary_hashes(AUTHOR_PREFIX)
        memory.drop_summaries(hashes)
        if embed:
            reembed(state_dir, memory.store, hashes)
    return len(hashes)
