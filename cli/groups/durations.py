"""`testcurator durations`: the per-test durations kept in the state directory.

``import`` merges pytest-split ``.test_durations`` files, or the results of runs made
elsewhere (run folders, results.jsonl, JUnit XML), into the store; ``export`` writes the
store as a ``.test_durations`` file (for ``pytest --splits`` or ``exec --durations``);
``show`` lists the slowest tests and the totals per source.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from testcurator.cli.commands import command, new_group
from testcurator.config.wrap import Wrapped
from testcurator.cli.options import DurationInputs, OutputDeprecated, OutTarget, Prefix, StateDir, TopK, take_deprecated

console = Console(highlight=False, soft_wrap=True)
app = new_group("durations", "Per-test durations (what shards are balanced by).")
EXPORT_DEFAULT = Path(".test_durations")


def _is_test_durations(path: Path) -> bool:
    """A pytest-split file: a JSON object (or list of pairs), not JSON lines of records."""
    if path.is_dir() or path.suffix == ".xml":
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False  # JSON lines, or not JSON at all: let the results reader say what it is
    return isinstance(data, list) or (isinstance(data, dict) and "nodeid" not in data)


@command(app, "import")
def import_cmd(
    paths: DurationInputs,
    state_dir: StateDir = None,
) -> None:
    """Merge durations into the store (the latest measurement of a test wins)."""
    from testcurator.errors import MissingPathError
    from testcurator.memory.paths import resolve_state_dir
    from testcurator.runner.shards.durations import DurationStore
    from testcurator.runner.results.ingest import load_results

    with DurationStore(resolve_state_dir(state_dir)) as store:
        for path in paths:
            if not path.exists():
                raise MissingPathError(path, "durations input")
            n = store.import_file(path) if _is_test_durations(path) else store.record(load_results([path]), "import")
            console.print(f"{path}: {n} duration(s)", markup=False)


@command(app, "export")
def export_cmd(
    out: OutTarget = EXPORT_DEFAULT,
    prefix: Prefix = None,
    state_dir: StateDir = None,
    output: OutputDeprecated = None,
) -> None:
    """Write the store in pytest-split's format (a .test_durations file)."""
    out = take_deprecated(out, output, "-o/--output", "--out", default=EXPORT_DEFAULT)
    from testcurator.memory.paths import resolve_state_dir
    from testcurator.runner.shards.durations import DurationStore

    with DurationStore(resolve_state_dir(state_dir)) as store:
        n = store.export_file(out, prefix)
    console.print(f"{out}: {n} duration(s)", markup=False)


@command(app, "show")
def show_cmd(
    top: TopK = 20,
    state_dir: StateDir = None,
) -> None:
    """The slowest tests (--top of them), and how many durations each source recorded."""
    from testcurator.memory.paths import resolve_state_dir
    from testcurator.runner.shards.durations import DurationStore

    with DurationStore(resolve_state_dir(state_dir)) as store:
        rows = store.rows()
    table = Table(title=f"{len(rows)} tests, {sum(r['seconds'] for r in rows):.1f} s in all")
    for column in ("seconds", "source", "node id"):
        table.add_column(column, justify="right" if column == "seconds" else "left", no_wrap=column == "seconds")
    for row in sorted(rows, key=lambda r: -r["seconds"])[:top]:  # Wrapped: a node id breaks at `::`, `/`, `_`
        table.add_row(f"{row['seconds']:.3f}", Wrapped(row["source"]), Wrapped(row["nodeid"]))
    console.print(table)
    sources = Counter(r["source"] for r in rows)
    console.print(", ".join(f"{k} {v}" for k, v in sorted(sources.items())) or "no durations recorded yet", markup=False)


def register(root: typer.Typer) -> None:
    """Add the `durations` group to ``root``."""
    root.add_typer(app, name="durations")
