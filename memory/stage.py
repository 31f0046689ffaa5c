"""Stage 2, memory: index the kept files and map their tests to ops, for a full run or a delta.

Three sources, each cheap on a rerun:
1. the tree-sitter index, summaries and embeddings (testcurator.memory.builder, incremental;
   the pipeline builds embeddings after the summaries, which the LLM brain may write:
   ``pipelines/nightly/graph.py``);
2. a collect-only pass with the capture plugin (:func:`collect_static`): every instance's
   generic name, device, dtype, OpInfo op and ModuleInfo, before anything runs (the static
   op map): PyTorch's device-generic machinery instantiates them from the real
   ``op_db``/``module_db``;
3. one execution on CPU under the op-capturing TorchDispatchMode: the aten ops each test
   really dispatches, and whether it passes on the reference device. Cached by the content
   of the files, the torch version and the capture format, so an unchanged tree is not run
   again.

A delta run (``testcurator upgrade``: ``only`` names the tests to re-evaluate) refreshes the
index over every kept file (it is incremental, and pruning would drop the files the delta
does not touch), but collects and captures only the files holding a delta test, through
the same sharded capture as a full run, running only the delta tests' instances
(``--curate-only`` deselects the rest at collection). Records
of other tests are never re-ingested, so the op map keeps what the last full run captured.

Either way the per-test evidence the bucket stage needs is written to ``evidence.json`` in
the run directory (:mod:`testcurator.memory.evidence`); the figures for the report are
returned.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

from testcurator.errors import ExecutionError
from testcurator.files import atomic_write_text
from testcurator.installed import torch_version
from testcurator.memory.builder import BuildStats, build
from testcurator.memory.capture_run import CAPTURE_FORMAT, CapturePlan, DeviceTarget, capture_kept, summary
from testcurator.memory.capture_select import RuleOut
from testcurator.memory.capture_shards import run_capture
from testcurator.memory.evidence import gather, write_evidence
from testcurator.memory.opmap import OpMap
from testcurator.plugin.only import write_keys
from testcurator.plugin.oprecord import OpRecord, read_records
from testcurator.runner.command import RunSpec, build_env, pytest_argv, reference_env, run_logged, tree_options
from testcurator.runner.eventlog import EventFold, EventTail
from testcurator.runner.shards.executors import Executor
from testcurator.runner.reconcile import PYTEST_FINISHED, pytest_message
from testcurator.runner.ticker import Ticker, duration
from testcurator.runner.warm import WarmPytest
from testcurator.vocab import TestKey

EVIDENCE = "evidence.json"


IMPORT_ERRORS = "static.import_errors.json"


def collect_static(torch_root: Path, files: Sequence[str], out: Path, log: Path,
                   device: DeviceTarget | None = None) -> Path:
    """Collect ``files`` (relative to ``torch_root``) and write their static records to ``out``,
    and the files that do not import (file -> pytest's error line) to :data:`IMPORT_ERRORS` beside it.

    On CPU (the reference device), or with ``device`` on the device, as the draft collects."""
    tmp = out.with_name(out.name + ".part")
    events = out.with_name(out.name + ".events.jsonl")
    events.unlink(missing_ok=True)
    # One upstream file that cannot be collected (a missing optional dependency) must not
    # cost the map of all the others.
    # --assert=plain: nothing runs, so rewriting asserts (parse and compile each module again) is waste.
    argv = pytest_argv("-q", "--collect-only", "--assert=plain", "--continue-on-collection-errors",
                       f"--curate-capture-ops={tmp}",
                       f"--curate-events={events}", *tree_options(torch_root, out.parent), *files)
    env = reference_env()
    if device is not None:  # the environment the draft's pytest gets
        argv += ["--curate-backend", device.backend] if device.backend else []
        env = build_env(RunSpec(out_dir=out.parent, torch_root=torch_root, device=device.device, env=device.env))
    returncode = run_logged(argv, cwd=torch_root, env=env, log=log)
    # 1: some files failed to collect (their errors are in the log); 5: nothing collected
    # (e.g. a tree of CUDA-only files) is a valid, empty map.
    errors = dict(sorted((rel, error_line(text)) for rel, text in _collect_errors(events, torch_root).items()))
    # No record at all is a fault, unless every file it collected failed to import (a delta
    # run's only touched file, say): then the map is empty and the errors say why.
    if returncode not in PYTEST_FINISHED or not (tmp.exists() or errors):
        raise ExecutionError(f"collecting {len(files)} file(s) failed (pytest exit {returncode}); see {log}:\n"
                             + pytest_message(log))
    if device is None:  # the reference's: a file that imports on CPU and not on the device fails in the draft
        atomic_write_text(out.with_name(IMPORT_ERRORS), json.dumps(errors, indent=1, sort_keys=True) + "\n")
    if not tmp.exists():
        tmp.write_text("", encoding="utf-8")
    tmp.replace(out)
    return out


def _collect_errors(events: Path, torch_root: Path) -> dict[str, str]:
    """File (relative to the torch root) -> collection error text."""
    fold = EventFold()
    for source, event in EventTail(events).poll() if events.exists() else []:
        fold.feed(source, event)
    rootdir = Path(fold.rootdir) if fold.rootdir else torch_root
    return {Path(os.path.relpath(rootdir / nodeid, torch_root)).as_posix(): text
            for nodeid, text in fold.collect_errors.items() if nodeid}


def error_line(text: str) -> str:
    """The line of a collection error that says what went wrong (``E   ImportError: ...``)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    return (errors[-1] if errors else lines[-1] if lines else "collection failed")[:300]


def import_errors(work: Path) -> dict[str, str]:
    """Files of the last static collection in ``work`` that do not import, with the error line."""
    path = work / IMPORT_ERRORS
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def read_capture(paths: Iterable[Path | None]) -> list[OpRecord]:
    """Every record of the capture files that exist (a line cut by a crash is skipped)."""
    present = [path for path in paths if path is not None and path.exists()]
    return [rec for path in present for rec in read_records(path) if rec is not None]


def _content_key(torch_root: Path, files: Sequence[str]) -> str:
    # The capture format's version is part of the key: a cache written in an older format
    # (``node_id`` before ``nodeid``) is not read back.
    digest = hashlib.sha256(f"{CAPTURE_FORMAT}\0{torch_version()}".encode())
    for rel in files:
        digest.update(rel.encode() + b"\0" + (torch_root / rel).read_bytes())
    return digest.hexdigest()[:24]


def _static_map(torch_root: Path, files: Sequence[str], work: Path) -> Path:
    """Collect-only with the capture plugin: one JSON line per instance, no execution."""
    out = work / "static.jsonl"
    if out.exists():
        return out
    return collect_static(torch_root, files, out, work / "static.log")


def _device_map(torch_root: Path, files: Sequence[str], work: Path, device: DeviceTarget,
                say: Callable[[str], None]) -> Path | None:
    """Collect-only on the device, as the draft will: which tests it instantiates. None when
    that collection fails (the backend does not import): then every CPU instance counts, and
    the draft reports the backend's fault."""
    out = work / "device_static.jsonl"
    if out.exists():
        return out
    try:
        return collect_static(torch_root, files, out, work / "device_static.log", device=device)
    except ExecutionError as exc:
        say(f"warning: collecting on {device.device} failed, so the capture selects from CPU alone: {exc}")
        return None


def _captured_map(torch_root: Path, files: Sequence[str], state_dir: Path, work: Path, run: CaptureRun,
                  static: Path, device: Path | None, say: Callable[[str], None]) -> tuple[Path, dict[str, Any]]:
    """Run the kept tests on CPU under the capture mode (memory/capture_run.py: what can
    matter for the device, cached per file), in shards on the run's executor (a capture shard
    asks for CPUs, not the device); the captured and projected records, and the figures."""
    cpu = read_capture([static])
    on_device = None
    pairs = {(TestKey.parse(r.nodeid).file, r.generic) for r in read_capture([device])} if device else set()
    if pairs:
        on_device = lambda file, generic: (file, generic) in pairs  # noqa: E731 - a one-line predicate
    elif device is not None and cpu:
        say("warning: the device's collection found no test at all, so the capture selects from CPU alone; "
            f"see {device.with_suffix('.log')}")
    plan = CapturePlan(run.executor, run.shards, run.workers, run.warm, run.budget_s, run.rule_out)
    records, figures = capture_kept(torch_root, files, cpu, on_device, state_dir=state_dir, work=work, plan=plan,
                                    say=say)
    say(summary(figures))
    return _write_records(work / "captured.jsonl", records), figures


def _ingest(state_dir: Path, records: Sequence[OpRecord]) -> None:
    opmap = OpMap(state_dir)
    try:
        opmap.store(records)
    finally:
        opmap.close()


def _figures(stats: BuildStats, captured: bool) -> dict[str, Any]:
    return {"files": stats.files_total, "parsed": stats.files_parsed, "tests": stats.tests_total,
            "failed_files": [f"{path}: {why}" for path, why in stats.failures], "captured": captured}


@dataclass(frozen=True)
class CaptureRun:
    """How the CPU capture runs: on which executor, in how many shards, with how many
    workers, and whether in a pytest started ahead (a delta run's: ``runner/warm.py``)."""

    executor: Executor
    shards: int = 1
    workers: int = 1
    warm: WarmPytest | None = None
    device: DeviceTarget | None = None  # a full capture keeps what the device instantiates
    budget_s: float | None = None  # the most the capture may cost (estimated CPU seconds)
    rule_out: RuleOut | None = None  # what the backend profile rules out (None: capture it all)


def run_memory_stage(torch_root: Path, files: Sequence[str], *, state_dir: Path, work: Path, embed: bool,
                     capture: CaptureRun | None, say: Callable[[str], None]) -> dict[str, Any]:
    """Build or refresh memory for ``files``; evidence into ``work``; figures for the report.

    ``capture`` None: no CPU op capture (the static map only)."""
    # The collect-only passes (CPU, and the device's) are pytests of their own that run
    # beside the index (the driver's own work), each on a core where there are two (at 1,000
    # files it is minutes). The capture waits for both (they say what it runs) and stays
    # on this thread: an executor such as Ray starts from the main thread.
    device_target = capture.device if capture is not None else None
    where = f"CPU and {device_target.device}" if device_target else "CPU"
    with Ticker(lambda t: f"memory: indexing, collecting on {where}: {duration(t)} so far", say), \
            ThreadPoolExecutor(max_workers=2, thread_name_prefix="static-map") as pool:
        static_job = pool.submit(_static_map, torch_root, files, work)
        device_job = pool.submit(_device_map, torch_root, files, work, device_target, say) if device_target else None
        stats = build(torch_root, list(files), state_dir, embed=embed)
        static = static_job.result()
        device = device_job.result() if device_job is not None else None
    captured, figures = (_captured_map(torch_root, files, state_dir, work, capture, static, device, say)
                         if capture is not None else (None, {}))
    with Ticker(lambda t: f"memory: storing the op map and the evidence: {duration(t)} so far", say):
        records = read_capture([static, captured])  # read once: for the op map and the evidence
        _ingest(state_dir, records)
        write_evidence(work / EVIDENCE, gather(records))
    # Files that do not import are decided as a whole (pipelines/nightly/steps.py), never per test.
    return {**_figures(stats, captured is not None), "import_errors": import_errors(work), "capture": figures}


# --- a delta run ---------------------------------------------------------------------
def delta_files(files: Sequence[str], only: Collection[TestKey]) -> list[str]:
    """The kept files holding a test of the delta ``only``."""
    touched = {key.file for key in only}
    return [f for f in files if f in touched]


def _is_delta(record: OpRecord, only: Collection[TestKey]) -> bool:
    return TestKey.of(TestKey.parse(record.nodeid).file, record.generic) in only


def _in_delta(records: Iterable[OpRecord], only: Collection[TestKey]) -> list[OpRecord]:
    return [r for r in records if _is_delta(r, only)]


def _write_records(path: Path, records: Sequence[OpRecord]) -> Path:
    atomic_write_text(path, "".join(r.to_json() + "\n" for r in records))
    return path


def _captured_delta(torch_root: Path, files: Sequence[str], only: Collection[TestKey], state_dir: Path, work: Path,
                    run: CaptureRun) -> tuple[Path | None, dict[str, str]]:
    """Run the delta tests once on CPU under the capture mode (cached by content and delta);
    the captured records, and the files of ``files`` that do not import (file -> error line).

    Through :func:`run_capture`, like a full capture (sharded by file, timed, on the run's
    executor), with ``--curate-only``: every instance of another test is deselected at
    collection, by identity (plugin/only.py). One pytest per shard collects the touched
    files and runs only the delta's instances; a separate collection for exact node ids
    would cost a second import of torch and op_db (most of a small collection's time:
    bench/upgrade.py). The same pytest says which files do not import (its collection
    errors): no static collection.
    """
    if not files:
        return None, {}
    digest = hashlib.sha256(_content_key(torch_root, files).encode())
    digest.update("\n".join(sorted(str(key) for key in only)).encode())
    cache = state_dir / "capture" / f"delta-{digest.hexdigest()[:24]}.jsonl"
    errors_cache = cache.with_name(cache.stem + ".import_errors.json")
    if not (cache.exists() and errors_cache.exists()):
        selection = ("--curate-only", str(write_keys(work / "capture" / "delta.tests", only, torch_root)),
                     "--curate-capture-confirm")
        everything = work / "capture" / "captured-all.jsonl"
        texts: dict[str, str] = {}
        captured = run_capture(torch_root, files, everything, work / "capture", state_dir=state_dir,
                               executor=run.executor, shards=run.shards, workers=run.workers, extra=selection,
                               collect_errors=texts, warm=run.warm)
        errors = dict(sorted((rel, error_line(text)) for rel, text in texts.items()))
        if not captured and not all(key.file in errors for key in only if key.file in files):
            raise ExecutionError(f"the delta's op capture wrote nothing; see {work / 'capture'}/*/capture.log")
        # --curate-only ran the delta's instances and nothing else: a record that names no
        # delta test means its node id does not say what it is (not relative to the tree),
        # and dropping it would leave the delta without evidence, silently.
        records = read_capture([everything])
        stray = [r.nodeid for r in records if not _is_delta(r, only)]
        if stray:
            raise ExecutionError(f"the delta's op capture recorded {len(stray)} instance(s) that match no "
                                 f"delta test (first: {stray[0]}; node ids relative to {torch_root}?); "
                                 f"see {work / 'capture'}/*/capture.log")
        _write_records(cache, records)
        atomic_write_text(errors_cache, json.dumps(errors, indent=1, sort_keys=True) + "\n")
    out = work / "captured.jsonl"
    shutil.copyfile(cache, out)
    return out, json.loads(errors_cache.read_text(encoding="utf-8"))


def run_delta_memory_stage(torch_root: Path, files: Sequence[str], only: Collection[TestKey], *, state_dir: Path,
                           work: Path, embed: bool, capture: CaptureRun | None,
                           recheck: Collection[str] = ()) -> dict[str, Any]:
    """Memory for a delta run; the figures of :func:`run_memory_stage` plus the delta's size.

    ``recheck``: more files to collect although none of their tests is re-evaluated (their
    source changed: they may have stopped importing). A touched file that does not import
    is in the figures' ``import_errors``, decided as a whole like in a full run."""
    stats = build(torch_root, list(files), state_dir, embed=embed)
    touched = delta_files(files, only)
    more = set(recheck) - set(touched)
    touched += [f for f in files if f in more]
    if capture is not None:
        source, errors = _captured_delta(torch_root, touched, only, state_dir, work, capture)
    else:  # no execution wanted: the collect-only pass gives the instances (static map)
        source = _static_map(torch_root, touched, work) if touched else None
        errors = import_errors(work)
    records = _in_delta(read_capture([source]), only)
    if records:
        _ingest(state_dir, records)
    write_evidence(work / EVIDENCE, gather(records))
    return {**_figures(stats, capture is not None), "delta_files": len(touched), "delta_tests": len(only),
            "import_errors": errors}
