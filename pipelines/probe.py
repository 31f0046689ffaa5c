"""The probe step: replay every call the captured tests made on the device, keep what it found.

Runs between memory and bucket (``testcurator run``; ``--no-probe`` turns it off) and on its
own (``testcurator probe --backend backend.yaml``). The calls come from the op map (the CPU
capture's distinct op x dtypes calls, each with one replayable example); calls the capability
table already holds for this backend and torch version are not replayed again. Per test, what
the table says about its calls goes to the run directory (``probe_evidence.json``), where the
bucket stage reads it. Those are predictions: the draft still runs every test that is not
skipped, and refine confirms or overturns each (:func:`overturned` counts the latter). On real
upstream files a CPU capture cannot tell a device-generic test's calls on the device from its
reference calls on CPU (``torch.randn(10)`` without ``device=``; a test without a ``device``
argument), so a prediction left unexecuted would end as a strict xfail that passes.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testcurator.agents.decision import Decision
from testcurator.agents.offline.probe import from_probe
from testcurator.config.profile import BackendProfile, load_profile
from testcurator.installed import torch_version
from testcurator.memory.capability import (
    CapabilityTable, backend_version, probe_evidence, write_probe_evidence,
)
from testcurator.memory.opmap import OpMap
from testcurator.memory.run_identity import backend_digest
from testcurator.runner.probe.replay import NO_EXAMPLE, ProbeSpec, probe_calls
from testcurator.runner.ticker import Ticker, duration
from testcurator.vocab import PROBE_STATUSES, TestKey

PROBE_EVIDENCE = "probe_evidence.json"


@dataclass(frozen=True)
class ProbeTarget:
    """The backend to probe: its profile, where it lives, and the state to keep the table in."""

    profile: BackendProfile
    profile_path: Path
    state_dir: Path

    @classmethod
    def load(cls, profile_path: Path, state_dir: Path) -> ProbeTarget:
        profile, _ = load_profile(profile_path)
        return cls(profile, profile_path.resolve(), state_dir)

    def table(self) -> CapabilityTable:
        _, paths = load_profile(self.profile_path)
        digest = backend_digest(self.profile, self.profile_path, paths["source_paths"])
        return CapabilityTable(self.state_dir, backend_version(digest), torch_version())


def run_probe(target: ProbeTarget, *, evidence_out: Path | None = None, only: Collection[str] | None = None,
              tests: Collection[TestKey] | None = None, workers: int = 1,
              say: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Probe the calls not yet in the table (of ``only``, when given) in ``workers`` processes
    at once; figures for the report (and ``evidence_out``, for ``tests`` when given: a delta
    run's)."""
    opmap = OpMap(target.state_dir)
    try:
        calls = opmap.calls()
        if only is not None:
            calls = {k: v for k, v in calls.items() if k in only}
        with target.table() as table:
            known = table.results()
            # A call not probed for want of an example is tried again once the capture has one.
            todo = {k: v for k, v in calls.items()
                    if k not in known or (v is not None and known[k].status == "not_probed" and NO_EXAMPLE in known[k].error)}
            started = time.perf_counter()
            if todo:
                say(f"probe: replaying {len(todo)} call(s) on {target.profile.device.torch_name} "
                    f"({len(calls) - len(todo)} known from an earlier probe)")
                spec = ProbeSpec(device=target.profile.device.torch_name, backend=target.profile.backend_module,
                                 env=target.profile.test_env(target.profile_path), cwd=target.profile_path.parent,
                                 workers=workers)
                with Ticker(lambda t: f"probe: replaying {len(todo)} call(s): {duration(t)} so far", say):
                    table.store(probe_calls(todo, spec, say))
            seconds = time.perf_counter() - started
            results = {k: r for k, r in table.results().items() if k in calls}
            if evidence_out is not None:
                write_probe_evidence(evidence_out, probe_evidence(opmap, results, tests))
            backend, torch_version = table.backend, table.torch
    finally:
        opmap.close()
    counts = Counter(r.status for r in results.values())
    return {"calls": len(calls), "replayed": len(todo), "reused": len(calls) - len(todo), "seconds": round(seconds, 3),
            "statuses": {s: counts.get(s, 0) for s in PROBE_STATUSES}, "backend_version": backend,
            "torch_version": torch_version}


def summary(figures: Mapping[str, Any]) -> str:
    shown = ", ".join(f"{s} {n}" for s, n in figures["statuses"].items() if n)
    return (f"probe: {figures['calls']} distinct call(s) ({shown or 'none'}); {figures['replayed']} replayed in "
            f"{figures['seconds']:.1f}s, {figures['reused']} reused")


def overturned(bucket: Sequence[Decision], refined: Sequence[Decision]) -> list[Decision]:
    """Bucket decisions made from the probe's evidence whose mode the draft's execution changed."""
    final = {d.test: d.mode for d in refined}
    return [d for d in bucket if from_probe(d)
            and final.get(d.test, d.mode) != d.mode]
