"""What a finished run left that the gap board reads, loaded once.

A run folder (``<state-dir>/runs/<id>/``) holds ``run.json`` (where the state, the profile and
the configs are), the draft's execution (``exec/results.jsonl``), the verification of the final
configs (``verify/results.jsonl``), the decisions (``refine/``, else ``bucket/``) and
``probe.json`` (which capability table the probe filled). The state dir holds the op map: per
captured CPU instance, the calls (op overload x dtypes) it made and its outcome on CPU. A run
without the CPU capture cannot say which test needs which op: that is bad input, said so. A run
that executed nothing (``--no-execute``) is read from its decisions: the instances the device's
collection found (``device_static.jsonl``) that a mode, an edit or an undeclared dtype holds back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from testcurator.agents.decision import Decision
from testcurator.config.profile import load_profile
from testcurator.errors import BadInputError
from testcurator.memory.capability import CapabilityTable, device_calls
from testcurator.memory.opmap import OpMap
from testcurator.names import split_dtypes
from testcurator.pipelines.store import RunStore
from testcurator.plugin.oprecord import OpRecord, read_records
from testcurator.runner.probe.replay import ProbeResult
from testcurator.runner.results.records import TestRecord, read_jsonl
from testcurator.vocab import FAILING, HELD_BACK_MODES, XFAIL_MODES, TestKey, instance_key, op_excluded

RUN_FILE = "run.json"
DEVICE_COLLECTION = "device_static.jsonl"  # the memory stage's collect-only pass on the device
#: One kind of captured instance: file, generic test, OpInfo op, ModuleInfo, dtype. The device's
#: instance of a kind is matched to the CPU capture's by it (parameters aside: their calls are
#: pooled), as the probe's per-test evidence matches them (memory/capability.py).
Kind = tuple[str, str, str | None, str | None, str | None]


@dataclass(frozen=True)
class RunSources:
    """Everything the board is computed from (see the module docstring)."""

    run_dir: Path
    state_dir: Path
    profile: Path
    configs: Path | None
    device: str
    declared_dtypes: frozenset[str] | None  # None: the profile declares none (every dtype counts)
    final: tuple[TestRecord, ...]  # the verification's records, else the draft's, else the decisions'
    verified: bool  # ``final`` is the verification of the final configs (not the draft)
    executed: bool = True  # False: the run ran no test; ``final`` is what its decisions hold back
    draft: Mapping[str, TestRecord] = field(default_factory=dict)  # instance key -> the draft's record
    decisions: Mapping[TestKey, Decision] = field(default_factory=dict)
    probe: Mapping[str, ProbeResult] = field(default_factory=dict)  # call -> the table's result
    calls: Mapping[Kind, frozenset[str]] = field(default_factory=dict)  # device calls per captured kind
    cpu_failed: frozenset[Kind] = frozenset()  # kinds whose captured CPU instance failed


def kind_of(file: str, generic: str | None, op: str | None, module: str | None, dtype: str | None) -> Kind:
    return (file, generic or "", op, module, dtype)


def record_kind(rec: TestRecord) -> Kind:
    return kind_of(TestKey.parse(rec.nodeid).file, rec.generic, rec.op, rec.module, rec.dtype)


def record_key(rec: TestRecord) -> str:
    return instance_key(rec.nodeid, rec.generic)


def _read_json(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BadInputError(f"{path}: not a readable run record ({exc})") from None
    if not isinstance(data, dict):
        raise BadInputError(f"{path}: not a run record (a JSON object was expected)")
    return data


def _capture_or_fail(run_dir: Path, state: Path) -> None:
    memory = run_dir / "memory.json"
    captured = _read_json(memory).get("captured") if memory.is_file() else None
    if captured is False or not (state / "ops.sqlite").is_file():
        raise BadInputError(
            f"the run {run_dir} has no CPU op capture (it ran with --no-capture-ops, or its state dir {state} "
            "holds no op map): the gap board needs it to know which test calls which op; run `testcurator run` "
            "again with --capture-ops")


def _results(run_dir: Path, name: str) -> list[TestRecord]:
    path = run_dir / name / "results.jsonl"
    return read_jsonl(path) if path.is_file() else []


def _decisions(run_dir: Path, files: list[str]) -> dict[TestKey, Decision]:
    store, out = RunStore(run_dir), {}
    for rel in files:
        found = store.read_decisions("refine", rel)
        for dec in found if found is not None else store.read_decisions("bucket", rel) or []:
            out[TestKey.of(rel, dec.test)] = dec
    return out


def _probe(run_dir: Path, state: Path) -> dict[str, ProbeResult]:
    path = run_dir / "probe.json"
    if not path.is_file():
        return {}  # --no-probe: execution alone says what the device lacks
    figures = _read_json(path)
    if not figures.get("backend_version") or not figures.get("torch_version"):
        raise BadInputError(f"{path}: no backend_version and torch_version, which name the capability table the "
                            "probe filled (a probe.json of an older testcurator: run again)")
    with CapabilityTable(state, str(figures["backend_version"]), str(figures["torch_version"])) as table:
        return table.results()


def _capture(state: Path) -> tuple[dict[Kind, frozenset[str]], frozenset[Kind]]:
    opmap = OpMap(state)
    try:
        calls: dict[Kind, set[str]] = {}
        for inst in map(device_calls, opmap.instance_calls()):
            kind = kind_of(TestKey.parse(inst.nodeid).file, inst.generic, inst.op, inst.module, inst.dtype)
            calls.setdefault(kind, set()).update(inst.calls)
        failed = {kind_of(TestKey.parse(r.nodeid).file, r.generic, r.op, r.module, r.dtype)
                  for r in opmap.captured() if r.outcome in FAILING}
    finally:
        opmap.close()
    return {k: frozenset(v) for k, v in calls.items()}, frozenset(failed)


def _held_by(rec: OpRecord, dec: Decision | None, declared: frozenset[str] | None) -> str | None:
    """Why the decisions hold back a collected instance (the text the plugin's skip gives), or None."""
    if dec is None:
        return None
    dtypes = split_dtypes(rec.dtype)
    for what, values, excluded in (("dtype", dtypes, dec.exclude_dtypes), ("module", (rec.module,), dec.exclude_modules)):
        hit = next((v for v in values if v and v in excluded), None)
        if hit:
            return f"{what} {hit} excluded by edits"
    if op_excluded(rec.op, dtypes, dec.exclude_ops):
        return f"op {rec.op} excluded by edits"
    missing = next((d for d in dtypes if declared is not None and d not in declared), None)
    if missing:
        return f"dtype {missing} is not in supported_dtypes"
    return dec.reason if dec.mode in HELD_BACK_MODES else None


def _decided(run_dir: Path, decisions: Mapping[TestKey, Decision], declared: frozenset[str] | None) -> list[TestRecord]:
    """A run that executed nothing: the device's collection (``device_static.jsonl``), each
    instance held back as its decision says (a mode, an edit, an undeclared dtype)."""
    path = run_dir / DEVICE_COLLECTION
    out = []
    for rec in (r for r in read_records(path) if r is not None) if path.is_file() else ():
        dec = decisions.get(TestKey.of(TestKey.parse(rec.nodeid).file, rec.generic))
        why = _held_by(rec, dec, declared)
        outcome = "passed" if why is None else "xfailed" if dec is not None and dec.mode in XFAIL_MODES else "skipped"
        out.append(TestRecord(rec.nodeid, outcome, generic=rec.generic, device=rec.device, dtype=rec.dtype, op=rec.op,
                              module=rec.module, failure_text=f"Skipped: {why}" if why else None))
    return out


def load(run_dir: Path) -> RunSources:
    """The sources of the finished run in ``run_dir`` (a run folder with ``run.json``)."""
    if not (run_dir / RUN_FILE).is_file():
        raise BadInputError(f"{run_dir} is not a run folder (no {RUN_FILE}): a run folder is <state-dir>/runs/<id>/")
    meta = _read_json(run_dir / RUN_FILE)
    state, profile_path = Path(str(meta["state_dir"])), Path(str(meta["profile"]))
    _capture_or_fail(run_dir, state)
    profile, _ = load_profile(profile_path, check_paths=False)
    declared = frozenset(d.name for d in profile.supported_dtypes) if profile.supported_dtypes is not None else None
    verify, draft = _results(run_dir, "verify"), _results(run_dir, "exec")
    decisions = _decisions(run_dir, list(meta.get("files") or []))
    final = verify or draft or _decided(run_dir, decisions, declared)
    calls, cpu_failed = _capture(state)
    out = Path(str(meta["out_dir"])) / "configs" if meta.get("out_dir") else None
    return RunSources(
        run_dir=run_dir, state_dir=state, profile=profile_path, configs=out, device=profile.device.torch_name,
        declared_dtypes=declared, final=tuple(final), verified=bool(verify), executed=bool(verify or draft),
        draft={record_key(r): r for r in draft}, decisions=decisions, probe=_probe(run_dir, state), calls=calls,
        cpu_failed=cpu_failed)
