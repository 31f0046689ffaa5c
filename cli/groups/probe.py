"""`testcurator probe --backend backend.yaml`: replay the captured calls on the device."""

from __future__ import annotations

import json

import typer
from rich.console import Console

from testcurator.cli.commands import command
from testcurator.cli.options import BackendReq, Format, StateDir, Workers
from testcurator.memory.paths import resolve_state_dir

SHOWN = 40


def probe_cmd(backend: BackendReq, state_dir: StateDir = None, workers: Workers = 1, fmt: Format = "text") -> None:
    """Replay, on the backend's device, every distinct aten call (op overload x input dtypes) the
    CPU op capture recorded, a subprocess per batch (`-n` of them at once), and keep the
    capability table in memory.

    The calls come from the op map (`testcurator run`, or `testcurator ops ingest FILE`); calls
    already probed for the same backend and torch version are reused, not replayed.
    """
    from testcurator.pipelines.probe import ProbeTarget, run_probe, summary

    err = Console(stderr=True, highlight=False)
    target = ProbeTarget.load(backend, resolve_state_dir(state_dir))
    figures = run_probe(target, workers=workers or 1, say=lambda line: err.print(line, markup=False))
    with target.table() as table:
        gaps = sorted(table.gaps().values(), key=lambda r: (r.status, r.call))
    if fmt == "json":
        typer.echo(json.dumps({**figures, "gaps": [vars(r) for r in gaps]}, indent=1, sort_keys=True))
        return
    out = Console(highlight=False, soft_wrap=True)
    out.print(summary(figures), markup=False)
    if not figures["calls"]:
        out.print("no captured calls in the op map: run `testcurator run` (with --capture-ops) or "
                  "`testcurator ops ingest FILE` first", markup=False)
    for r in gaps[:SHOWN]:
        out.print(f"  {r.status:<17} {r.call}: {r.error.splitlines()[0] if r.error else ''}"[:200], markup=False)
    if len(gaps) > SHOWN:
        out.print(f"  ... {len(gaps) - SHOWN} more (--format json lists all)", markup=False)


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    command(app, "probe")(probe_cmd)
