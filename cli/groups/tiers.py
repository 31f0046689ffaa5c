"""`testcurator tiers`: seed 000's L1/L2/L3 for a curated config (pipelines/tiers.py)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from testcurator.cli.commands import command
from testcurator.cli.options import BudgetS, ConfigReq, OutTarget, StateDir, TimingsDevice, TorchRoot

console = Console(highlight=False, soft_wrap=True)


def tiers_cmd(
    config: ConfigReq,
    budget_s: BudgetS,
    torch_root: TorchRoot = None,
    device: TimingsDevice = None,
    out: OutTarget = None,
    state_dir: StateDir = None,
) -> None:
    """L1: fewest instances exercising every supported op within --budget-s; L2: the config; L3: plus held-back probes.

    Reads the state directory's op map (the CPU capture) and durations; writes the tiers file
    (--out, default: tiers.json beside the config) that `exec --tier` reads.
    """
    from testcurator.config.loader import load_config
    from testcurator.errors import BadInputError, MissingPathError
    from testcurator.memory.opmap import OpMap
    from testcurator.memory.paths import resolve_state_dir
    from testcurator.pipelines.tiers import default_tiers_file, plan_tiers, write_plan
    from testcurator.runner.shards.durations import DurationStore

    if not config.exists():
        raise MissingPathError(config, "--config")
    root = (torch_root or Path.cwd()).resolve()
    state = resolve_state_dir(state_dir)
    opmap = OpMap(state)
    if not opmap.exists():
        raise BadInputError(f"{state}: no op map; run the pipeline (or `memory build` with a capture) first")
    with DurationStore(state) as durations:
        known = durations.known()
    plan = plan_tiers(load_config(config, torch_root=root), root, opmap.captured(), known, budget_s, device)
    target = out or default_tiers_file(config)
    write_plan(target, plan)
    data = plan.to_json()
    table = Table(title=f"tiers of {config} (L1 budget {budget_s:g} s)")
    for column in ("tier", "instances", "expected s", "what"):
        table.add_column(column, justify="right" if column in ("instances", "expected s") else "left")
    l1 = data["L1"]
    table.add_row("L1", str(l1["instances"]), f"{l1['expected_s']:.1f}", f"covers {l1['ops_covered']} of {l1['ops_total']} ops")
    table.add_row("L2", str(data["L2"]["instances"]), f"{data['L2']['expected_s']:.1f}", "the curated suite")
    table.add_row("L3", str(data["L3"]["instances"]), f"{data['L3']['expected_s']:.1f}",
                  f"+{data['L3']['probes']} held-back instances as strict-xfail probes")
    console.print(table)
    if l1["uncovered_ops"]:
        shown = ", ".join(l1["uncovered_ops"][:10]) + (" ..." if len(l1["uncovered_ops"]) > 10 else "")
        console.print(f"not covered within the budget: {shown}", markup=False)
    console.print(f"tiers: {target}", markup=False)


def register(app: typer.Typer) -> None:
    """Add this module's command to ``app``."""
    command(app, "tiers")(tiers_cmd)
