"""Offline, deterministic one-paragraph summary of a test.

Built only from what the index saw: the test's name and class split into words, the
docstring's first paragraph, what its decorators say (dtypes, ops, parametrisation,
device restrictions, skips) and the torch symbols it calls. The same record always gives
the same text, so a rebuild never churns embeddings. When the LLM brain is on, the model
writes the summary instead (agents/llm/summaries.py, through
:meth:`testcurator.memory.api.Memory.set_summary`, keyed by content hash); :func:`reembed`
then brings the embeddings up to the new texts.

The summary is also the text that gets embedded: meaning first (name words, docstring),
mechanics after, because the embedding model truncates long inputs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from testcurator.memory.collect import Decorator, IndexedTest

if TYPE_CHECKING:
    from testcurator.memory.embeddings import SyncStats
    from testcurator.memory.store import MemoryStore

MAX_CHARS = 600
_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_ONLY = {"onlyCPU": "CPU", "onlyCUDA": "CUDA", "onlyNativeDeviceTypes": "native device types",
         "onlyCUDAAndPRIVATEUSE1": "CUDA and privateuse1", "onlyMPS": "MPS", "onlyXPU": "XPU",
         "onlyOn": "selected devices", "onlyNativeDeviceTypesAnd": "native device types"}


def words(identifier: str) -> str:
    """``test_broadcastTensors_2d`` -> ``broadcast tensors 2d``."""
    name = identifier[4:] if identifier.lower().startswith("test") else identifier
    parts = [p for chunk in name.split("_") for p in _CAMEL_RE.split(chunk) if p]
    return " ".join(p.lower() for p in parts)


def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    para = doc.strip().split("\n\n", 1)[0]
    return " ".join(para.split())


def _short_expr(text: str, limit: int = 60) -> str:
    text = " ".join(text.split()).replace("torch.", "")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _decorator_phrase(deco: Decorator) -> str | None:
    name = deco.short
    if name == "dtypes" or name.startswith("dtypesIf"):
        # A per-device list says what that device runs, not what the test needs everywhere.
        where = f" on {name[len('dtypesIf'):]}" if name != "dtypes" else ""
        return f"for dtypes {', '.join(_short_expr(a, 30) for a in deco.args)}{where}" if deco.args else None
    if name == "ops":
        extra = "; ".join(f"{k} {_short_expr(v)}" for k, v in deco.kwargs)
        src = deco.args[0] if deco.args else "op_db"
        return f"for each op in {_short_expr(src, 40)}" + (f" ({extra})" if extra else "")
    if name == "modules":
        return f"for each module in {_short_expr(deco.args[0], 40)}" if deco.args else "for each module"
    if name in ("parametrize", "parametrize_test"):
        arg = deco.args[0].strip("\"'") if deco.args else "?"
        return f"parametrized over {arg}"
    if name in _ONLY:
        return f"only on {_ONLY[name]}"
    if name.startswith("skip") or name.startswith("expectedFailure") or name.startswith("xfail"):
        cond = f" ({_short_expr(deco.args[0], 50)})" if deco.args and name.endswith("If") else ""
        return f"{name}{cond}"
    if name in ("slowTest", "largeTensorTest", "serialTest", "deviceCountAtLeast", "tf32_on_and_off"):
        return name
    return None


def offline_summary(record: IndexedTest, path: str) -> str:
    """A short deterministic description of ``record`` (defined in file ``path``)."""
    fn = record.fn
    head = f"{record.generic}: {words(fn.name)}"
    if record.cls:
        head += f" (in {words(record.cls)} tests, {path})"
    else:
        head += f" ({path})"
    parts = [head + "."]
    doc = _first_paragraph(fn.docstring)
    if doc:
        parts.append(doc if doc.endswith(".") else doc + ".")
    phrases = [p for p in (_decorator_phrase(d) for d in fn.decorators) if p]
    if record.device_generic:
        phrases.insert(0, "device-generic")
    if phrases:
        parts.append("; ".join(phrases).capitalize() + ".")
    if fn.calls:
        parts.append("Calls " + ", ".join(c.replace("torch.", "", 1) if c != "torch" else c for c in fn.calls[:12]) + ".")
    elif fn.methods:
        parts.append("Uses " + ", ".join(fn.methods[:8]) + ".")
    text = " ".join(parts)
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 3] + "..."


def reembed(state_dir: Path, store: MemoryStore, changed: Iterable[str]) -> SyncStats:
    """Bring the embeddings up to the summaries now in ``store``.

    Vectors are keyed by content hash, so a hash whose summary text changed (an LLM wrote
    it, or it went back to the offline one) keeps its old vector until it is dropped: drop
    ``changed``, then sync (which embeds every hash without a vector).
    """
    from testcurator.memory.embeddings import EmbeddingStore, embedding_texts

    embeddings = EmbeddingStore(state_dir)
    try:
        ids = sorted(set(changed))
        if ids:
            embeddings.collection.delete(ids=ids)
        return embeddings.sync(embedding_texts(store))
    finally:
        embeddings.close()
