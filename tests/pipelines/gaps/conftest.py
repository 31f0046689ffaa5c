"""A finished run written by hand: the files the gap board reads, with the shapes the pipeline
writes them in (run.json, memory.json, results.jsonl, decisions, probe.json and the capability
table, the op map in the state dir), so the board is tested without running a pipeline."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from testcurator.agents.decision import Decision
from testcurator.memory.capability import CapabilityTable
from testcurator.memory.opmap import OpMap
from testcurator.pipelines.store import RunStore
from testcurator.plugin.oprecord import OpRecord
from testcurator.runner.probe.replay import ProbeResult
from testcurator.runner.results.records import TestRecord, write_jsonl

FILE = "test/test_gaps.py"
PROFILE = """\
schema_version: 1
name: gapdev
device: {kind: privateuse1, name: gapdev}
hooks: [eager_ops]
supported_dtypes: [{name: float32}, {name: int64}]
discover_ops: false
"""


def rec(name: str, outcome: str, *, dtype: str | None = "float32", op: str | None = None,
        text: str | None = None, cls: str | None = None, evidence: str | None = None,
        generic: str | None = None) -> TestRecord:
    """A device record of ``TestGaps::<name>`` (its instance name built the way PyTorch does)."""
    suffix = "_".join(p for p in (op, "gapdev", dtype) if p)
    return TestRecord(f"{FILE}::TestGapsGAPDEV::{name}_{suffix}", outcome, generic=generic or f"TestGaps::{name}",
                      device="gapdev", dtype=dtype, op=op, failure_class=cls, evidence=evidence, failure_text=text)


def skipped(name: str, why: str, **kw: Any) -> TestRecord:
    return rec(name, "skipped", text=f"Skipped: {why} (/out/configs/test/test_gaps.yaml:3:7)", **kw)


def decision(name: str, mode: str, reason: str = "a reason", evidence: Sequence[str] = ()) -> Decision:
    return Decision(f"TestGaps::{name}", mode, reason, tuple(evidence), "offline", None)


def captured(name: str, calls: Sequence[str], *, dtype: str | None = "float32", op: str | None = None,
             outcome: str = "passed") -> OpRecord:
    """The CPU capture's record of ``TestGaps::<name>`` with the calls it made."""
    suffix = "_".join(p for p in (op, "cpu", dtype) if p)
    return OpRecord(f"{FILE}::TestGapsCPU::{name}_{suffix}", f"TestGaps::{name}", "captured", device="cpu",
                    dtype=dtype, op=op, outcome=outcome, calls=tuple(calls))


@dataclass
class Run:
    """What to write: the verification's and the draft's records, decisions, probe rows, capture."""

    verify: list[TestRecord] = field(default_factory=list)
    draft: list[TestRecord] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    probe: dict[str, tuple[str, str]] = field(default_factory=dict)  # call -> (status, error)
    capture: list[OpRecord] = field(default_factory=list)
    captured: bool = True


def write_run(root: Path, run: Run) -> Path:
    """The run folder of ``run`` under ``root`` (its state dir and profile beside it)."""
    state, run_dir, profile = root / "state", root / "state" / "runs" / "run-1", root / "backend.yaml"
    run_dir.mkdir(parents=True)
    profile.write_text(PROFILE, encoding="utf-8")
    (run_dir / "run.json").write_text(json.dumps({
        "files": [FILE], "out_dir": str(root / "out"), "profile": str(profile), "state_dir": str(state),
        "torch_root": str(root / "upstream")}), encoding="utf-8")
    (run_dir / "memory.json").write_text(json.dumps({"captured": run.captured}), encoding="utf-8")
    for name, records in (("verify", run.verify), ("exec", run.draft)):
        if records:
            (run_dir / name).mkdir()
            write_jsonl(run_dir / name / "results.jsonl", records)
    RunStore(run_dir).write_decisions("refine", FILE, run.decisions)
    if run.captured:
        opmap = OpMap(state)
        opmap.store(run.capture)
        opmap.close()
    if run.probe:
        (run_dir / "probe.json").write_text(json.dumps({"backend_version": "b1", "torch_version": "t1"}))
        with CapabilityTable(state, "b1", "t1") as table:
            table.store(ProbeResult(call, status, error) for call, (status, error) in run.probe.items())
    return run_dir


@pytest.fixture()
def make_run(tmp_path: Path) -> Callable[[Run], Path]:
    return lambda run: write_run(tmp_path, run)


@pytest.fixture(scope="session")
def gapkit() -> Any:
    """This module: test files cannot import a conftest (--import-mode=importlib), so its
    helpers reach them through this fixture (``gapkit.rec``, ``gapkit.Run`` ...)."""
    import sys

    return sys.modules[__name__]
