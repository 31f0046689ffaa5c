"""`testcurator exec` (run a curated or draft suite) and `testcurator refine` (ingest results).

``exec`` is a thin layer over :func:`testcurator.runner.execute.execute`; ``refine`` over
:func:`testcurator.runner.results.ingest.load_results`, writing ``results.jsonl`` and printing a
summary per outcome and failure class. Re-bucketing plugs into ``refine`` through
:data:`REFINE_HOOKS`: callables ``(config_dir, records, out_dir) -> None`` run after
ingestion (the lead registers the re-bucketing there).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from testcurator.cli.commands import command, usage_error
from testcurator.cli.options import (AllowEmpty, BackendExec, Config, Device, Devices, Durations, ExecutorName, Group,
                                     Labels, MemoryLimitMb, MoreResults, OutDir, ProfileDeprecated, Quiet, RefreshSnapshot, Results, Retries,
                                     Rootdir, Shard, Shards, StateDir, TestPaths, Tier, TiersFile, Timeout, TorchRoot, Workers,
                                     take_deprecated)
from testcurator.config.wrap import Wrapped
from testcurator.runner.results.records import TestRecord

RefineHook = Callable[[Path, Sequence[TestRecord], Path, Optional[Path]], None]
console = Console(highlight=False, soft_wrap=True)


def rebucket_hook(config: Path, records: Sequence[TestRecord], out: Path, torch_root: Optional[Path]) -> None:
    """Re-bucket ``config`` in place with the offline brain's refine rules."""
    import json

    from testcurator.agents.brain import BackendContext
    from testcurator.agents.offline.brain import OfflineBrain
    from testcurator.pipelines.rebucket import rebucket
    from testcurator.files import atomic_write_text

    result = rebucket(config, records, OfflineBrain(), BackendContext(name="refine", device=""), torch_root=torch_root)
    atomic_write_text(out / "changes.json", json.dumps(result.changed, indent=1, sort_keys=True) + "\n")
    for note in result.notes:
        console.print(f"note: {note}", markup=False)
    for change in result.changed:
        console.print(f"{change['file']} {change['test']}: {change['from']} -> {change['to']}: {change['reason']}", markup=False)
    for kept in result.proposed:
        console.print(f"{kept['file']} {kept['test']}: {kept['mode']} kept (a person's decision), for review: "
                      f"{kept['reason']}", markup=False)
    console.print(f"re-bucketed {len(result.changed)} test(s) in {config}; {result.unchanged} unchanged; "
                  f"{len(result.unmatched)} result(s) for files the config does not list", markup=False)


#: Steps run by ``refine --config`` after ingestion, in order (explicit registry).
REFINE_HOOKS: list[RefineHook] = [rebucket_hook]


def summary_table(records: Sequence[TestRecord], title: str) -> Table:
    """Outcomes, then failure classes, each with one example: a test and why it ended so."""
    table = Table(title=title)
    table.add_column("outcome / class")
    table.add_column("tests", justify="right")
    table.add_column("example")  # Wrapped: a name breaks at `::`, `_`, `/`, never mid-word
    by_outcome: dict[str, list[TestRecord]] = {}
    for record in records:
        by_outcome.setdefault(record.outcome, []).append(record)
    for outcome, recs in sorted(by_outcome.items()):
        table.add_row(outcome, str(len(recs)), Wrapped(example(recs)))  # not markup: evidence may hold [brackets]
    by_class: dict[str, list[TestRecord]] = {}
    for record in records:
        if record.failure_class:
            by_class.setdefault(record.failure_class, []).append(record)
    for cls, recs in sorted(by_class.items()):
        flaky = sum(r.flaky for r in recs)
        label = f"  {cls}" + (f" ({flaky} flaky)" if flaky else "")
        table.add_row(label, str(len(recs)), Wrapped(example(recs)))
    return table


def example(records: Sequence[TestRecord], width: int = 160) -> str:
    """``test: reason`` for the first record that has a reason (a skip's, a failure's evidence).

    The test name is never cut; a reason that would make the line longer than ``width`` is
    shortened at a word and ends with `…` (its full text is in results.jsonl)."""
    from testcurator.pipelines.report import outcome_reason

    for record in records:
        reason = outcome_reason(record)
        if reason:
            name = record.generic or record.nodeid
            return f"{name}: {shorten(reason, max(40, width - len(name) - 2))}"
    return (records[0].generic or records[0].nodeid) if records else ""


def shorten(text: str, width: int) -> str:
    """``text``, or its first words up to ``width`` characters and `…`."""
    if len(text) <= width:
        return text
    cut = text[:width - 1]
    cut = cut[:cut.rfind(" ")] if " " in cut else cut
    return cut.rstrip() + " …"


def exec_command(
    paths: TestPaths = None,
    config: Config = None,
    torch_root: TorchRoot = None,
    state_dir: StateDir = None,
    device: Device = None,
    backend: BackendExec = None,
    workers: Workers = 1,
    timeout: Timeout = 300.0,
    memory_limit_mb: MemoryLimitMb = 0.0,
    retries: Retries = 1,
    out: OutDir = Path("testcurator-run"),
    rootdir: Rootdir = None,
    quiet: Quiet = False,
    allow_empty: AllowEmpty = False,
    shard: Shard = None,
    shards: Shards = 1,
    group: Group = None,
    tier: Tier = None,
    tiers_file: TiersFile = None,
    executor: ExecutorName = "local",
    profile: ProfileDeprecated = None,
    durations: Durations = None,
    labels: Labels = None,
    refresh_snapshot: RefreshSnapshot = False,
) -> None:
    """Run the curated (or draft) suite; write results.jsonl, junit.xml and manifest.json to --out.

    --backend backend.yaml gives the module to import, the device, python_path and env
    (--device overrides the device). Without --torch-root (or $TORCH_ROOT), the torch root
    the memory in --state-dir was built from is used, when there is one. --shard K/N runs
    one leg of a CI matrix, split by the matrix's durations snapshot in --state-dir (the first
    leg takes it; --refresh-snapshot takes a new one); --shards N runs all N on --executor
    and merges them.

    Exit codes: 0 the curated suite held; 1 it did not (a mandatory_success failure or a
    strict unexpected pass, named in the last lines); 2 bad input; 3 infrastructure failure
    (pytest could not run the tests or its results are cut short; or no test ran, unless
    --allow-empty).
    """
    from testcurator.cli.groups import exec_scale
    from testcurator.errors import MissingPathError
    from testcurator.runner.command import RunSpec
    from testcurator.runner.progress import NullProgress, RichProgress
    from testcurator.runner.shards.run import run_sharded
    from testcurator.runner.verdict import verdict

    if config is None and not paths:
        raise usage_error("give --config PATH (a curated run) or test paths (a draft run)")
    backend_file, module = _backend_arg(take_deprecated(backend, str(profile) if profile else None, "--profile",
                                                        "--backend"))
    torch_root = torch_root or _memory_torch_root(state_dir)
    for path, what in ((config, "--config"), (torch_root, "--torch-root")):
        if path is not None and not path.exists():
            raise MissingPathError(path, what)
    assert out is not None and workers is not None
    scale = exec_scale.ScaleOptions(shard, shards, group, tier, tiers_file, executor, backend_file, durations, state_dir,
                                    refresh_snapshot)
    spec = RunSpec(out_dir=out, paths=tuple(paths or ()), config=config, torch_root=torch_root, device=device,
                   backend=module, workers=workers, timeout=timeout or None,
                   memory_limit_mb=memory_limit_mb or None, retries=retries, rootdir=rootdir)
    spec, runner, store = exec_scale.prepare(spec, scale, say=lambda message: console.print(message, markup=False))
    exec_scale.check_backend_imports(spec, backend_file)
    spec = replace(spec, extra_args=spec.extra_args + label_args(labels, config))
    progress = NullProgress() if quiet else RichProgress()
    with progress:
        progress.phase("collecting", None)  # from the first second: loading the config, starting pytest
        records = run_sharded(spec, shards=shards, executor=runner, store=store, source="exec", progress=progress)
    console.print(summary_table(records, f"{len(records)} tests" + (f" (shard {spec.shard})" if spec.shard else "")))
    console.print(f"results: {out / 'results.jsonl'}  junit: {out / 'junit.xml'}  manifest: {out / 'manifest.json'}",
                  markup=False)
    if labels and config is not None:
        for line in labels_left_out(config, torch_root, spec.extra_args):
            console.print(line, markup=False)
    if config is not None and not (paths or shard or group or tier or labels):  # the whole config ran
        for line in stale_lines(config, torch_root, records):
            console.print(line, markup=False)
    result = verdict(records, allow_empty=allow_empty)
    for line in result.lines(str(out / "results.jsonl")):
        console.print(line, markup=False)
    if result.code:
        raise typer.Exit(result.code)


STALE_SHOWN = 10


def stale_lines(config: Path, torch_root: Optional[Path], records: Sequence[TestRecord]) -> list[str]:
    """Config entries that name no test the run collected, in files that ran: counted, the
    first :data:`STALE_SHOWN` named (issue 22: only pytest's log said so)."""
    from testcurator.config.loader import load_config
    from testcurator.runner.reconcile import is_infrastructure
    from testcurator.vocab import TestKey

    root = (torch_root or Path.cwd()).resolve()
    seen: dict[str, set[str]] = {}
    for record in records:
        if not is_infrastructure(record):
            path = Path(TestKey.parse(record.nodeid).file)
            file = str((path if path.is_absolute() else root / path).resolve())
            seen.setdefault(file, set()).update([record.generic] if record.generic else [])
    stale: list[str] = []
    for f in load_config(config, torch_root=root).files:
        ran = seen.get(str(f.resolved_path.resolve()))
        if ran:  # a file that did not run says nothing about its names
            stale += [f"{f.raw_path}::{name}" for e in f.entries for name in e.names if name not in ran]
    if not stale:
        return []
    return ([f"{len(stale)} stale config entr{'y' if len(stale) == 1 else 'ies'}: named tests the run did not collect "
             "(removed upstream, or not instantiated on this device)"]
            + [f"  {name}" for name in stale[:STALE_SHOWN]]
            + ([f"  ... and {len(stale) - STALE_SHOWN} more"] if len(stale) > STALE_SHOWN else []))


def _backend_arg(value: Optional[str]) -> tuple[Optional[Path], Optional[str]]:
    """(profile, module) from --backend: a YAML file is a profile, anything else a module."""
    if value is None:
        return None, None
    return (Path(value), None) if Path(value).suffix in (".yaml", ".yml") else (None, value)


def label_args(labels: Optional[list[str]], config: Optional[Path]) -> tuple[str, ...]:
    """``--curate-labels`` for ``exec --labels`` (checked before anything runs)."""
    if not labels:
        return ()
    names = [n.strip() for value in labels for n in value.split(",") if n.strip()]
    if not names:
        raise usage_error("--labels: give one or more label names")
    if config is None:
        raise usage_error("--labels needs --config (labels are written in the config)")
    return (f"--curate-labels={','.join(dict.fromkeys(names))}",)


def labels_left_out(config: Path, torch_root: Optional[Path], extra_args: Sequence[str]) -> list[str]:
    """What ``--labels`` left out, per config file entry (the pytest log has the test counts)."""
    from testcurator.config.loader import load_config

    wanted = next(a.split("=", 1)[1].split(",") for a in extra_args if a.startswith("--curate-labels="))
    loaded = load_config(config, torch_root=torch_root)
    out = [f"left out by label ({loc.file}:{loc.line}): {f.raw_path} (labels: {', '.join(f.labels) or 'none'})"
           for f in loaded.files if not set(wanted) & set(f.labels) for loc in [f.location]]
    kept = len(loaded.files) - len(out)
    return [f"labels {','.join(wanted)}: {kept} of {len(loaded.files)} config file(s) selected; files the config "
            "does not list are left out too", *out]


def _memory_torch_root(state_dir: Optional[Path]) -> Optional[Path]:
    """The torch root recorded in the memory under ``state_dir``, if a memory exists there."""
    from testcurator.memory.paths import memory_db_path, resolve_state_dir

    state = resolve_state_dir(state_dir)
    if not memory_db_path(state).is_file():
        return None
    from testcurator.memory.api import Memory

    with Memory.open(state) as memory:
        return memory.torch_root


def refine_command(
    results: Results = None,
    more: MoreResults = None,
    config: Config = None,
    torch_root: TorchRoot = None,
    out: OutDir = Path("testcurator-refine"),
    device: Devices = None,
) -> None:
    """Ingest results made elsewhere (JUnit XML, JSONL), classify failures; with --config, re-bucket that config in place.

    Shard legs' run folders must partition what they collected (every instance in exactly
    one leg), else exit 3 naming the overlap and what is missing, and nothing is written.
    """
    from testcurator.runner.results.ingest import load_results
    from testcurator.runner.shards.merge import run_manifests, write_outputs

    inputs = [*(results or []), *(more or [])]
    if not inputs:
        raise usage_error("give --results FILE (JUnit XML, results.jsonl, or a folder of them)")
    assert out is not None
    records = load_results(inputs, devices=tuple(device or ()))
    # Shards' run folders merge losslessly: their records, and their manifests side by side.
    write_outputs(out, records, run_manifests(inputs))
    console.print(summary_table(records, f"{len(records)} tests from {len(inputs)} input(s)"))
    console.print(f"results: {out / 'results.jsonl'}", markup=False)
    if config is not None:
        for hook in REFINE_HOOKS:
            hook(config, records, out, torch_root.resolve() if torch_root else None)


def register(app: typer.Typer) -> None:
    """Add ``exec`` and ``refine`` to ``app``."""
    command(app, "exec")(exec_command)
    command(app, "refine")(refine_command)
