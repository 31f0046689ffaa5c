"""`testcurator import ...` and `testcurator export ...`: other teams' skip lists in and out.

- ``import skiplist FILE --torch-root ROOT --out DIR``: an intel/torch-xpu-ops style
  ``skip_dict`` file (read as data, never executed);
- ``import disabled-tests FILE.json --torch-root ROOT --out DIR [--test-file test/x.py]``:
  PyTorch's disabled-tests JSON;
- ``export disabled-tests --config DIR --out FILE.json [--torch-root ROOT]``.

Imports collect the named upstream files for real, write one config per file, and print
(or ``--report`` write: ``.json`` or markdown) the exactness report.
"""

from __future__ import annotations

import json
from pathlib import Path
import typer

from testcurator.cli.commands import command, new_group
from testcurator.cli.options import (AsDevice, ConfigReq, DisabledFile, Force, ImportMode, IncludeUnlisted,
                                     IncludeXfail, OutDirReq, OutFileReq, Platform, Platforms, Report, SkiplistFile,
                                     StripSuffix, TestFile, TorchRoot, TorchRootReq, UnlistedMode)
from testcurator.errors import BadInputError
from testcurator.files import atomic_write_text
from testcurator.pipelines.exporters import export_disabled_tests
from testcurator.pipelines.importers import ImportReport, import_disabled_tests, import_skip_list, report_markdown

import_app = new_group(None, "Import skip lists into configs (with an exactness report).")
export_app = new_group(None, "Export a config to other formats.")


def _emit(report: ImportReport, out: Path, report_path: Path | None) -> None:
    text = report_markdown(report)
    if report_path is not None:
        body = json.dumps(report.as_dict(), indent=2, sort_keys=True) + "\n" if report_path.suffix == ".json" else text
        atomic_write_text(report_path, body)
    typer.echo(text, nl=False)
    typer.echo(f"wrote {len(report.written)} config(s) to {out}: {', '.join(report.written)}")


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
) -> None:
    """Import an intel/torch-xpu-ops style skip list (substring patterns, as pytest -k applies them)."""
    if not file.is_file():
        raise BadInputError(f"skip list does not exist: {file}")
    result = import_skip_list(file, torch_root=torch_root.resolve(), out_dir=out, mode=mode, unlisted_mode=unlisted_mode,
                              strip_suffix=strip_suffix, as_device=as_device, force=force)
    _emit(result, out, report)


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
) -> None:
    """Import PyTorch's disabled-tests JSON (exact names, PyTorch's own matching rule)."""
    if not file.is_file():
        raise BadInputError(f"disabled-tests file does not exist: {file}")
    result = import_disabled_tests(file, torch_root=torch_root.resolve(), out_dir=out, test_files=test_file or (),
                                   mode=mode, unlisted_mode=unlisted_mode, platform=platform, force=force)
    _emit(result, out, report)


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
