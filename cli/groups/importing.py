"""`testcurator import ...` and `testcurator export ...`: other teams' skip lists in and out.

- ``import skiplist FILE --torch-root ROOT --out DIR``: an intel/torch-xpu-ops style
  ``skip_dict`` file (read as data, never executed);
- ``import disabled-tests FILE.json --torch-root ROOT --out DIR [--test-file test/x.py]``:
  PyTorch's disabled-tests JSON;
- ``export disabled-tests --config DIR --out FILE.json [--torch-root ROOT]``.

Imports collect the named upstream files for real (a file that does not load is reported,
the rest imported), write one config per file, validate what they wrote (level 2), and
print (or ``--report`` write: ``.json`` or markdown) the exactness report, ending in a
summary line; exit 1 when more patterns than ``--max-unplaced`` could not be placed.
"""

from __future__ import annotations

import json
from pathlib import Path
import typer

from testcurator.cli.commands import command, new_group, usage_error
from testcurator.cli.options import (AsDevice, ConfigReq, DisabledFile, Force, ImportMode, IncludeUnlisted,
                                     IncludeXfail, MaxUnplaced, OutDirReq, OutFileReq, Platform, Platforms, Report,
                                     SkiplistFile, StripSuffix, TestFile, TorchRoot, TorchRootReq, UnlistedMode)
from testcurator.errors import BadInputError
from testcurator.files import atomic_write_text
from testcurator.pipelines.migrate.exporters import export_disabled_tests
from testcurator.pipelines.migrate.report import ImportReport, parse_threshold, report_markdown, unplaced_exceeds
from testcurator.pipelines.migrate.importers import import_disabled_tests, import_skip_list

import_app = new_group(None, "Import skip lists into configs (with an exactness report).")
export_app = new_group(None, "Export a config to other formats.")


DEFAULT_MAX_UNPLACED = "10%"


def _check_threshold(text: str) -> None:
    # A usage error before the minutes of collection, not after.
    try:
        parse_threshold(text)
    except BadInputError as exc:
        raise usage_error(f"--max-unplaced: {exc}") from exc


def _emit(report: ImportReport, out: Path, report_path: Path | None, max_unplaced: str) -> None:
    text = report_markdown(report)
    if report_path is not None:
        body = json.dumps(report.as_dict(), indent=2, sort_keys=True) + "\n" if report_path.suffix == ".json" else text
        atomic_write_text(report_path, body)
    typer.echo(text, nl=False)
    typer.echo(f"wrote {len(report.written)} config(s) to {out}: {', '.join(report.written)}")
    for note in report.notes:
        typer.echo(f"note: {note}", err=True)
    failure = unplaced_exceeds(report, max_unplaced)
    if failure:
        typer.echo(f"error: {failure} (see the report; --max-unplaced sets the limit)", err=True)
        raise typer.Exit(1)


def skiplist_cmd(
    file: SkiplistFile,
    torch_root: TorchRootReq,
    out: OutDirReq,
    mode: ImportMode = "skip",
    unlisted_mode: UnlistedMode = "mandatory_success",
    strip_suffix: StripSuffix = "_xpu",
    as_device: AsDevice = None,
    report: Report = None,
    force: Force = False,
    max_unplaced: MaxUnplaced = DEFAULT_MAX_UNPLACED,
) -> None:
    """Import an intel/torch-xpu-ops style skip list (substring patterns, as pytest -k applies them)."""
    if not file.is_file():
        raise BadInputError(f"skip list does not exist: {file}")
    _check_threshold(max_unplaced)
    result = import_skip_list(file, torch_root=torch_root.resolve(), out_dir=out, mode=mode, unlisted_mode=unlisted_mode,
                              strip_suffix=strip_suffix, as_device=as_device, force=force)
    _emit(result, out, report, max_unplaced)


def disabled_import_cmd(
    file: DisabledFile,
    torch_root: TorchRootReq,
    out: OutDirReq,
    test_file: TestFile = None,
    mode: ImportMode = "skip",
    unlisted_mode: UnlistedMode = "mandatory_success",
    platform: Platform = None,
    report: Report = None,
    force: Force = False,
    max_unplaced: MaxUnplaced = "100%",
) -> None:
    """Import PyTorch's disabled-tests JSON (exact names, PyTorch's own matching rule)."""
    if not file.is_file():
        raise BadInputError(f"disabled-tests file does not exist: {file}")
    _check_threshold(max_unplaced)
    result = import_disabled_tests(file, torch_root=torch_root.resolve(), out_dir=out, test_files=test_file or (),
                                   mode=mode, unlisted_mode=unlisted_mode, platform=platform, force=force)
    _emit(result, out, report, max_unplaced)


def disabled_export_cmd(
    config: ConfigReq,
    out: OutFileReq,
    torch_root: TorchRoot = None,
    include_xfail: IncludeXfail = True,
    include_unlisted: IncludeUnlisted = False,
    platform: Platforms = None,
) -> None:
    """Export every skipped (and xfail) test of a config as PyTorch's disabled-tests JSON.

    With --torch-root (or $TORCH_ROOT) the upstream files are collected and instantiated
    names are exported; without, generic names only.
    """
    result = export_disabled_tests(config, out, torch_root=torch_root.resolve() if torch_root else None,
                                   include_xfail=include_xfail, include_unlisted=include_unlisted, platforms=platform or ())
    modes = ", ".join(f"{m} {n}" for m, n in result.by_mode.items()) or "none"
    typer.echo(f"wrote {result.written} key(s) to {out} ({modes})")
    for line in result.not_exported:
        typer.echo(f"not exported: {line}")


def register(app: typer.Typer) -> None:
    """Add the ``import`` and ``export`` groups to ``app``."""
    command(import_app, "skiplist")(skiplist_cmd)
    command(import_app, "disabled-tests")(disabled_import_cmd)
    command(export_app, "disabled-tests")(disabled_export_cmd)
    app.add_typer(import_app, name="import")
    app.add_typer(export_app, name="export")
