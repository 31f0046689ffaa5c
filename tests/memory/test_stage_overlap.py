"""The memory stage runs its collect-only passes (CPU and the device's) beside the index, and
the capture after both: what they collect says what the capture runs."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from testcurator.memory import stage
from testcurator.memory.builder import BuildStats
from testcurator.memory.evidence import read_evidence
from testcurator.plugin.oprecord import OpRecord
from testcurator.runner.shards.executors import LocalExecutor
from testcurator.vocab import TestKey

NODE = "test/test_a.py::TestACPU::test_x_cpu_float32"


def test_the_collections_run_beside_the_index_and_the_capture_after_them(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The two collections and the index each wait for the others to have started: run one
    after the other, this stage would wait forever (bounded here). The capture starts only
    once both collections ended, and gets their records."""
    started = {name: threading.Event() for name in ("static", "device", "index")}
    ended: set[str] = set()
    threads: dict[str, str] = {}

    def meet(name: str) -> None:
        threads[name] = threading.current_thread().name
        started[name].set()
        for other, event in started.items():
            assert event.wait(30), f"{name} waited for {other} to start"

    def static_map(torch_root: Path, files: Any, work: Path) -> Path:
        meet("static")
        out = work / "static.jsonl"
        out.write_text(OpRecord(NODE, "TestA::test_x", "static", "cpu", "float32").to_json() + "\n", encoding="utf-8")
        ended.add("static")
        return out

    def device_map(torch_root: Path, files: Any, work: Path, device: Any, say: Any) -> Path:
        meet("device")
        out = work / "device_static.jsonl"
        out.write_text(OpRecord("test/test_a.py::TestADEV::test_x_dev_float32", "TestA::test_x", "static", "dev",
                                "float32").to_json() + "\n", encoding="utf-8")
        ended.add("device")
        return out

    def build(*args: Any, **kwargs: Any) -> BuildStats:
        meet("index")
        return BuildStats()

    def captured_map(torch_root: Path, files: Any, state_dir: Path, work: Path, run: Any, static: Path,
                     device: Path | None, say: Any) -> tuple[Path, dict[str, Any]]:
        threads["capture"] = threading.current_thread().name
        assert ended == {"static", "device"}, "the capture started before the collections ended"
        assert device is not None and device.name == "device_static.jsonl" and static.name == "static.jsonl"
        out = work / "captured.jsonl"
        out.write_text(OpRecord(NODE, "TestA::test_x", "captured", "cpu", "float32", aten=("aten::add.Tensor",),
                                outcome="passed").to_json() + "\n", encoding="utf-8")
        return out, {"kept": 1}

    monkeypatch.setattr(stage, "_static_map", static_map)
    monkeypatch.setattr(stage, "_device_map", device_map)
    monkeypatch.setattr(stage, "_captured_map", captured_map)
    monkeypatch.setattr(stage, "build", build)
    work = tmp_path / "run"
    work.mkdir()
    capture = stage.CaptureRun(LocalExecutor(), device=stage.DeviceTarget("dev", None))
    figures = stage.run_memory_stage(tmp_path, ["test/test_a.py"], state_dir=tmp_path / "state", work=work,
                                     embed=False, capture=capture, say=print)
    assert figures["captured"] is True and figures["capture"] == {"kept": 1}
    # The capture and the index stay on the calling thread (Ray starts from there); the collections do not.
    assert threads["capture"] == threads["index"] == threading.current_thread().name
    assert threading.current_thread().name not in (threads["static"], threads["device"])
    evidence = read_evidence(work / stage.EVIDENCE)[TestKey.parse("test/test_a.py::TestA::test_x")]
    assert evidence.aten == ("aten::add.Tensor",) and evidence.cpu == {NODE: "passed"}
