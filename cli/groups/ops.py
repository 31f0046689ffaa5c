"""`testcurator ops ...`: the test-to-op map.

- ``testcurator ops ingest FILE...``: load capture files written by
  ``pytest --curate-capture-ops FILE`` (FILE's xdist parts ``FILE.gw*`` come along);
- ``testcurator ops tests-for OP [--dtype D] [--format json]``: which tests use an op;
- ``testcurator ops for-test Class::test [--format json]``: which ops a test uses.

``add_ingest_command(memory_app)`` adds the same ingest as ``testcurator memory ingest-ops``.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
import typer

from testcurator.cli.commands import command, new_group
from testcurator.cli.options import CaptureFiles, Dtype, Format, JsonDeprecated, OpArg, StateDir, TestName, take_deprecated
from testcurator.memory.opmap import OpMap

def _opmap(state_dir: Path | None) -> OpMap:
    from testcurator.memory.paths import resolve_state_dir

    return OpMap(resolve_state_dir(state_dir))


def ingest_cmd(files: CaptureFiles, state_dir: StateDir = None) -> None:
    """Load capture files into the op map (each FILE with its xdist parts FILE.gw*); re-ingesting a test replaces its record."""
    opmap = _opmap(state_dir)
    try:
        for path in files:
            stats = opmap.ingest(path)
            note = f", {stats.partial_lines} truncated line(s) skipped" if stats.partial_lines else ""
            typer.echo(
                f"{path}: {stats.records} record(s) from {stats.files} file(s): "
                f"{stats.captured} captured, {stats.compiled} compile, {stats.static} static{note}"
            )
        counts = opmap.counts()
    finally:
        opmap.close()
    typer.echo(
        f"op map {opmap.path}: {counts['captured']} captured, {counts['compile']} compile, {counts['static']} static, "
        f"{counts['aten_ops']} distinct aten op(s)"
    )


def tests_for_cmd(
    op: OpArg,
    dtype: Dtype = None,
    state_dir: StateDir = None,
    fmt: Format = "text",
    as_json: JsonDeprecated = False,
) -> None:
    """List the instantiated tests that use OP, one per line (generic, device, dtype, source, node id)."""
    as_json = take_deprecated(fmt, "json" if as_json else None, "--json", "--format json", default="text") == "json"
    opmap = _opmap(state_dir)
    if not opmap.exists():
        typer.echo(f"no op map at {opmap.path} yet; hint: testcurator ops ingest FILE", err=True)
    try:
        hits = opmap.tests_for(op, dtype=dtype)
    finally:
        opmap.close()
    if as_json:
        typer.echo(json.dumps([asdict(h) for h in hits], indent=2))
        return
    for hit in hits:
        typer.echo(f"{hit.generic}\t{hit.device or '-'}\t{hit.dtype or '-'}\t{hit.source}\t{hit.nodeid}")
    # An instance that compiled has two hits (eager and compile): count instances once.
    typer.echo(f"{len({h.nodeid for h in hits})} test instance(s) use {op}", err=True)


def for_test_cmd(
    generic: TestName,
    state_dir: StateDir = None,
    fmt: Format = "text",
    as_json: JsonDeprecated = False,
) -> None:
    """List the aten ops any instance of a test uses, with their source and instance count."""
    as_json = take_deprecated(fmt, "json" if as_json else None, "--json", "--format json", default="text") == "json"
    opmap = _opmap(state_dir)
    try:
        uses = opmap.ops_for_test(generic)
    finally:
        opmap.close()
    if as_json:
        typer.echo(json.dumps([asdict(u) for u in uses], indent=2))
        return
    for use in uses:
        typer.echo(f"{use.aten}\t{','.join(use.sources)}\t{use.instances}")


def add_ingest_command(memory_app: typer.Typer) -> None:
    """Add ``ingest-ops`` to the ``memory`` group (called by cli/groups/memory.py)."""
    command(memory_app, "ingest-ops")(ingest_cmd)


def register(app: typer.Typer) -> None:
    """Add the ``ops`` group to ``app``."""
    ops_app = new_group("ops", "The test-to-op map: which tests use which aten ops.")
    command(ops_app, "ingest")(ingest_cmd)
    command(ops_app, "tests-for")(tests_for_cmd)
    command(ops_app, "for-test")(for_test_cmd)
    app.add_typer(ops_app, name="ops")
