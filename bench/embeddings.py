"""Embedding throughput: EmbeddingStore.sync against the raw model's encode, same texts.

Run: ``python bench/embeddings.py [--count 256]``. Texts are real function sources from
the installed torch (its internal test helpers), cut to ~1,500 characters, the size of a
test body the memory stage embeds. Prints, side by side in one run:
raw encode texts/s, cold sync texts/s (embed + chromadb add), their ratio, warm sync
(nothing to embed) seconds, and query / similar p50 latency.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import os
import statistics
import tempfile
import time
from pathlib import Path

from testcurator.memory.embeddings import EmbeddingStore
from testcurator.memory.minilm import MiniLMEmbedder, load_minilm

SOURCES = ("testing/_internal/common_methods_invocations.py", "testing/_internal/common_utils.py",
           "testing/_internal/common_nn.py")


def corpus(count: int, max_chars: int = 1500) -> dict[str, str]:
    """``count`` distinct function sources from torch, keyed by content hash."""
    import torch

    root = Path(torch.__file__).parent
    texts: dict[str, str] = {}
    for rel in SOURCES:
        source = (root / rel).read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef):
                text = (ast.get_source_segment(source, node) or "")[:max_chars]
                texts[hashlib.sha256(text.encode()).hexdigest()] = text
                if len(texts) >= count:
                    return texts
    return texts


def timed(fn) -> float:  # noqa: ANN001 - any zero-argument callable
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def timed_both(fn, child: MiniLMEmbedder | None = None) -> tuple[float, float]:  # noqa: ANN001
    """(wall, CPU) seconds: CPU time is what stays comparable on a busy machine. With
    ``child``, the CPU of the embedder's model process counts too (it runs the model)."""
    wall, cpu = time.perf_counter(), time.process_time() + _child_cpu(child)
    fn()
    return time.perf_counter() - wall, time.process_time() + _child_cpu(child) - cpu


def _child_cpu(embedder: MiniLMEmbedder | None) -> float:
    """User + system CPU seconds of the embedder's running child process (Linux /proc)."""
    process = embedder._child if embedder is not None else None  # a bench may read the private field
    if process is None:
        return 0.0
    fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=192)
    parser.add_argument("--rounds", type=int, default=3,
                        help="raw and sync alternate this many times; medians are reported")
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()

    texts = corpus(args.count)
    values = list(texts.values())
    load_s = timed(load_minilm)
    model = load_minilm()
    model.encode(values[:8], batch_size=64)  # warm-up: first call pays one-off setup
    # The store's embedder runs the model in a child process (memory/minilm.py): started once
    # here, and given to every round's store, so the rounds compare steady-state costs.
    embedder = MiniLMEmbedder()
    child_s = timed(lambda: embedder.encode(values[:8]))

    raw, cold, ratios, cpu_ratios = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            # Alternating pairs: on a shared machine the load drifts; each ratio compares
            # two runs made seconds apart.
            raw_wall, raw_cpu = timed_both(
                lambda: model.encode(values, batch_size=64, normalize_embeddings=True)
            )
            store = EmbeddingStore(Path(tmp, f"round{i}"), embedder=embedder)
            sync_wall, sync_cpu = timed_both(lambda: store.sync(texts), child=embedder)
            raw.append(raw_wall)
            cold.append(sync_wall)
            ratios.append(sync_wall / raw_wall)
            cpu_ratios.append(sync_cpu / raw_cpu)
            if i < args.rounds - 1:
                store.close()
        warm = store.sync(texts)
        probes = values[: args.queries]
        query_ms = [1000 * timed(lambda t=t: store.query(t[:200], k=10)) for t in probes]
        similar_ms = [1000 * timed(lambda h=h: store.similar(h, k=10)) for h in list(texts)[: args.queries]]
        store.close()
        embedder.close()

    n, raw_s, cold_s = len(values), statistics.median(raw), statistics.median(cold)
    print(f"texts: {n} function sources, mean {sum(map(len, values)) / n:.0f} chars; {args.rounds} rounds")
    print(f"model load (once per process): {load_s:.2f} s")
    print(f"the store's embedding process, started and first encode: {child_s:.2f} s")
    print(f"raw model.encode:      {raw_s:7.2f} s  {n / raw_s:7.1f} texts/s  (median)")
    print(f"EmbeddingStore.sync:   {cold_s:7.2f} s  {n / cold_s:7.1f} texts/s  (median, cold)")
    print(f"ratio sync/raw time:   {statistics.median(ratios):7.3f}  per round: "
          + ", ".join(f"{r:.3f}" for r in ratios) + "  (1.0 = no overhead over the model)")
    print(f"ratio sync/raw CPU:    {statistics.median(cpu_ratios):7.3f}  per round: "
          + ", ".join(f"{r:.3f}" for r in cpu_ratios))
    print(f"warm sync (0 to embed): {warm.seconds * 1000:6.1f} ms  (kept {warm.kept}, added {warm.added})")
    print(f"query p50 (encode + search): {statistics.median(query_ms):6.1f} ms")
    print(f"similar p50 (search only):   {statistics.median(similar_ms):6.1f} ms")


if __name__ == "__main__":
    main()
