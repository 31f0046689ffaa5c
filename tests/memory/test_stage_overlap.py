"""The memory stage runs its collect-only pass beside the index and the capture."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from testcurator.memory import stage
from testcurator.memory.builder import BuildStats
from testcurator.memory.evidence import read_evidence
from testcurator.plugin.oprecord import OpRecord
from testcurator.runner.executors import LocalExecutor
from testcurator.vocab import TestKey

NODE = "test/test_a.py::TestACPU::test_x_cpu_float32"


def test_the_static_map_runs_while_the_index_and_the_capture_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each side waits for the other to have started: run one after the other, this stage
    would wait forever (bounded here), and its records are read only once both ended."""
    static_started, capture_started = threading.Event(), threading.Event()
    threads: dict[str, str] = {}

    def static_map(torch_root: Path, files: Any, work: Path) -> Path:
        threads["static"] = threading.current_thread().name
        static_started.set()
        assert capture_started.wait(30), "the static map waited for the capture to start"
        out = work / "static.jsonl"
        out.write_text(OpRecord(NODE, "TestA::test_x", "static", "cpu", "float32").to_json() + "\n", encoding="utf-8")
        return out

    def captured_map(torch_root: Path, files: Any, state_dir: Path, work: Path, run: Any, say: Any) -> Path:
        threads["capture"] = threading.current_thread().name
        capture_started.set()
        assert static_started.wait(30), "the capture waited for the static map to start"
        out = work / "captured.jsonl"
        out.write_text(OpRecord(NODE, "TestA::test_x", "captured", "cpu", "float32", aten=("aten::add.Tensor",),
                                outcome="passed").to_json() + "\n", encoding="utf-8")
        return out

    monkeypatch.setattr(stage, "_static_map", static_map)
    monkeypatch.setattr(stage, "_captured_map", captured_map)
    monkeypatch.setattr(stage, "build", lambda *a, **k: BuildStats())
    work = tmp_path / "run"
    work.mkdir()
    figures = stage.run_memory_stage(tmp_path, ["test/test_a.py"], state_dir=tmp_path / "state", work=work,
                                     embed=False, capture=stage.CaptureRun(LocalExecutor()), say=print)
    assert figures["captured"] is True
    # The capture stays on the calling thread (Ray starts from there); the static map does not.
    assert threads["capture"] == threading.current_thread().name != threads["static"]
    evidence = read_evidence(work / stage.EVIDENCE)[TestKey.parse("test/test_a.py::TestA::test_x")]
    assert evidence.aten == ("aten::add.Tensor",) and evidence.cpu == {NODE: "passed"}
