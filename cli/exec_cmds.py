"""`testcurator exec` (run a curated or draft suite) and `testcurator refine` (ingest results).

``exec`` is a thin layer over :func:`testcurator.runner.execute.execute`; ``refine`` over
:func:`testcurator.runner.ingest.load_results`, writing ``results.jsonl`` and printing a
summary per outcome and failure class. Re-bucketing plugs into ``refine`` through
:data:`REFINE_HOOKS`: callables ``(config_dir, records, out_dir) -> None`` run after
ingestion (the lead registers the re-bucketing there).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from testcurator.runner.records import TestRecord

RefineHook = Callable[[Path, Sequence[TestRecord], Path, Optional[Path]], None]
console = Console(highlight=False, soft_wrap=True)


def rebucket_hook(config: Path, records: Sequence[TestRecord], out: Path, torch_root: Optional[Path]) -> None:
    """Re-bucket ``config`` in place with the offline brain's refine rules."""
    import json

    from testcurator.agents.brain import BackendContext
    from testcurator.agents.offline import OfflineBrain
    from testcurator.pipelines.rebucket import rebucket
    from testcurator.files import atomic_write_text

    result = rebucket(config, records, OfflineBrain(), BackendContext(name="refine", device=""), torch_root=torch_root)
    atomic_write_text(out / "changes.json", json.dumps(result.changed, indent=1, sort_keys=True) + "\n")
    for change in result.changed:
        console.print(f"{change['file']} {change['test']}: {change['from']} -> {change['to']}: {change['reason']}", markup=False)
    console.print(f"re-bucketed {len(result.changed)} test(s) in {config}; {result.unchanged} unchanged; "
                  f"{len(result.unmatched)} result(s) for files the config does not list", markup=False)


#: Steps run by ``refine --config`` after ingestion, in order (explicit registry).
REFINE_HOOKS: list[RefineHook] = [rebucket_hook]


def summary_table(records: Sequence[TestRecord], title: str) -> Table:
    """Outcomes, then failure classes with one example of evidence each."""
    table = Table(title=title)
    table.add_column("outcome / class")
    table.add_column("tests", justify="right")
    table.add_column("example evidence", overflow="fold")
    for outcome, n in sorted(Counter(r.outcome for r in records).items()):
        table.add_row(outcome, str(n), "")
    by_class: dict[str, list[TestRecord]] = {}
    for record in records:
        if record.failure_class:
            by_class.setdefault(record.failure_class, []).append(record)
    for cls, recs in sorted(by_class.items()):
        flaky = sum(r.flaky for r in recs)
        label = f"  {cls}" + (f" ({flaky} flaky)" if flaky else "")
        example = (recs[0].evidence or "").splitlines()[0][:160] if recs[0].evidence else ""
        table.add_row(label, str(len(recs)), Text(example))  # Text: evidence is not markup
    return table


def exec_command(
    config: Annotated[Optional[Path], typer.Option("--config", help="config file or directory (curated run)")] = None,
    torch_root: Annotated[Optional[Path], typer.Option("--torch-root", help="upstream PyTorch checkout (${TORCH_ROOT})")] = None,
    device: Annotated[Optional[str], typer.Option("--device", help="device type to instantiate tests for, e.g. curatedev")] = None,
    backend: Annotated[Optional[str], typer.Option("--backend", help="backend module (dotted name or path) to import first")] = None,
    workers: Annotated[int, typer.Option("-n", "--workers", min=1, help="pytest-xdist workers")] = 1,
    timeout: Annotated[float, typer.Option("--timeout", min=0, help="per-test timeout in seconds (0: none)")] = 300.0,
    retries: Annotated[int, typer.Option("--retries", min=0, help="reruns of failing tests to tell flaky from consistent")] = 1,
    out: Annotated[Path, typer.Option("--out", help="output directory")] = Path("testcurator-run"),
    rootdir: Annotated[Optional[Path], typer.Option("--rootdir", help="pytest rootdir and working directory")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
    paths: Annotated[Optional[list[str]], typer.Argument(help="test files or node ids (draft run, or narrow the config)")] = None,
) -> None:
    """Run the curated (or draft) suite; write results.jsonl, junit.xml and manifest.json."""
    from testcurator.errors import BadInputError
    from testcurator.runner.command import RunSpec
    from testcurator.runner.execute import execute
    from testcurator.runner.progress import NullProgress, RichProgress

    if config is None and not paths:
        raise BadInputError("exec: give --config DIR (curated run) or test paths (draft run)")
    for path, what in ((config, "--config"), (torch_root, "--torch-root")):
        if path is not None and not path.exists():
            from testcurator.errors import MissingPathError

            raise MissingPathError(path, what)
    spec = RunSpec(out_dir=out, paths=tuple(paths or ()), config=config, torch_root=torch_root, device=device,
                   backend=backend, workers=workers, timeout=timeout or None, retries=retries, rootdir=rootdir)
    result = execute(spec, NullProgress() if quiet else RichProgress())
    console.print(summary_table(result.records, f"{len(result.records)} tests"))
    console.print(f"results: {out / 'results.jsonl'}  junit: {out / 'junit.xml'}  manifest: {out / 'manifest.json'}",
                  markup=False)


def refine_command(
    results: Annotated[list[Path], typer.Option("--results", help="JUnit XML / results.jsonl / directory (repeatable)")],
    config: Annotated[Optional[Path], typer.Option("--config", help="config to re-bucket in place from the results")] = None,
    torch_root: Annotated[Optional[Path], typer.Option("--torch-root", envvar="TORCH_ROOT", help="value of ${TORCH_ROOT} in the config")] = None,
    out: Annotated[Path, typer.Option("--out", help="output directory")] = Path("testcurator-refine"),
    device: Annotated[Optional[list[str]], typer.Option("--device", help="extra device name(s) in class names, e.g. curatedev")] = None,
    more: Annotated[Optional[list[Path]], typer.Argument(help="more result files (after --results FILE)")] = None,
) -> None:
    """Ingest results made elsewhere (JUnit XML, JSONL), classify failures; with --config, re-bucket that config in place."""
    from testcurator.runner.ingest import load_results
    from testcurator.runner.records import write_jsonl

    results = [*results, *(more or [])]
    records = load_results(results, devices=tuple(device or ()))
    write_jsonl(out / "results.jsonl", records)
    console.print(summary_table(records, f"{len(records)} tests from {len(results)} input(s)"))
    console.print(f"results: {out / 'results.jsonl'}", markup=False)
    if config is not None:
        for hook in REFINE_HOOKS:
            hook(config, records, out, torch_root.resolve() if torch_root else None)


def register(app: typer.Typer) -> None:
    """Add ``exec`` and ``refine`` to ``app``."""
    app.command("exec")(exec_command)
    app.command("refine")(refine_command)
