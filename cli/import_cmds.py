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
from typing import Annotated, Optional

import typer

from testcurator.errors import BadInputError
from testcurator.files import atomic_write_text
from testcurator.pipelines.exporters import export_disabled_tests
from testcurator.pipelines.importers import ImportReport, import_disabled_tests, import_skip_list, report_markdown
from testcurator.vocab import MODES

import_app = typer.Typer(help="Import skip lists into configs (with an exactness report).", no_args_is_help=True)
export_app = typer.Typer(help="Export a config to other formats.", no_args_is_help=True)

TorchRoot = Annotated[Path, typer.Option("--torch-root", help="PyTorch checkout holding test/.", envvar="TORCH_ROOT")]
OutDir = Annotated[Path, typer.Option("--out", help="Directory for the configs (one per upstream file).")]
Mode = Annotated[str, typer.Option("--mode", help="Mode of matched tests: skip, xfail or xfail_strict.")]
Unlisted = Annotated[str, typer.Option("--unlisted-mode", help="unlisted_test_mode of each imported file.")]
Report = Annotated[Optional[Path], typer.Option("--report", help="Also write the report (.json, else markdown).")]
Force = Annotated[bool, typer.Option("--force", help="Replace configs that already exist in --out.")]


def _check_modes(*modes: str) -> None:
    for mode in modes:
        if mode not in MODES:
            raise BadInputError(f"unknown mode {mode!r} (expected one of {', '.join(MODES)})")


def _emit(report: ImportReport, out: Path, report_path: Path | None) -> None:
    text = report_markdown(report)
    if report_path is not None:
        body = json.dumps(report.as_dict(), indent=2, sort_keys=True) + "\n" if report_path.suffix == ".json" else text
        atomic_write_text(report_path, body)
    typer.echo(text, nl=False)
    typer.echo(f"wrote {len(report.written)} config(s) to {out}: {', '.join(report.written)}")


def skiplist_cmd(
    file: Annotated[Path, typer.Argument(help="Python file holding skip_dict = {file: (patterns...) | None}.")],
    torch_root: TorchRoot,
    out: OutDir,
    mode: Mode = "skip",
    unlisted_mode: Unlisted = "mandatory_success",
    strip_suffix: Annotated[str, typer.Option("--strip-suffix", help="Wrapper-file suffix to drop from keys.")] = "_xpu",
    as_device: Annotated[Optional[str], typer.Option("--as-device", help="Device the list was written for (xpu); "
                                                     "its name in patterns becomes the collected device.")] = None,
    report: Report = None,
    force: Force = False,
) -> None:
    """Import an intel/torch-xpu-ops style skip list (substring patterns, as pytest -k applies them)."""
    _check_modes(mode, unlisted_mode)
    if not file.is_file():
        raise BadInputError(f"skip list does not exist: {file}")
    result = import_skip_list(file, torch_root=torch_root.resolve(), out_dir=out, mode=mode, unlisted_mode=unlisted_mode,
                              strip_suffix=strip_suffix, as_device=as_device, force=force)
    _emit(result, out, report)


def disabled_import_cmd(
    file: Annotated[Path, typer.Argument(help="PyTorch disabled-tests JSON: {\"test (module.Class)\": [issue, [platforms]]}.")],
    torch_root: TorchRoot,
    out: OutDir,
    test_file: Annotated[Optional[list[str]], typer.Option("--test-file", help="Upstream file (relative to the torch "
                                                           "root) to match keys in; repeatable.")] = None,
    mode: Mode = "skip",
    unlisted_mode: Unlisted = "mandatory_success",
    platform: Annotated[Optional[str], typer.Option("--platform", help="Only keys disabled on this platform (or all).")] = None,
    report: Report = None,
    force: Force = False,
) -> None:
    """Import PyTorch's disabled-tests JSON (exact names, PyTorch's own matching rule)."""
    _check_modes(mode, unlisted_mode)
    if not file.is_file():
        raise BadInputError(f"disabled-tests file does not exist: {file}")
    result = import_disabled_tests(file, torch_root=torch_root.resolve(), out_dir=out, test_files=test_file or (),
                                   mode=mode, unlisted_mode=unlisted_mode, platform=platform, force=force)
    _emit(result, out, report)


def disabled_export_cmd(
    config: Annotated[Path, typer.Option("--config", help="Config file or directory.")],
    out: Annotated[Path, typer.Option("--out", help="JSON file to write (atomically).")],
    torch_root: Annotated[Optional[Path], typer.Option("--torch-root", help="Collect to export instantiated names "
                                                       "(without: generic names only).")] = None,
    include_xfail: Annotated[bool, typer.Option("--include-xfail/--no-include-xfail", help="xfail/xfail_strict "
                                                "export as disabled (the format has nothing else).")] = True,
    include_unlisted: Annotated[bool, typer.Option("--include-unlisted", help="Also tests skipped by unlisted_test_mode.")] = False,
    platform: Annotated[Optional[list[str]], typer.Option("--platform", help="Platforms of every key (default: all).")] = None,
) -> None:
    """Export every skipped (and xfail) test of a config as PyTorch's disabled-tests JSON."""
    result = export_disabled_tests(config, out, torch_root=torch_root.resolve() if torch_root else None,
                                   include_xfail=include_xfail, include_unlisted=include_unlisted, platforms=platform or ())
    modes = ", ".join(f"{m} {n}" for m, n in result.by_mode.items()) or "none"
    typer.echo(f"wrote {result.written} key(s) to {out} ({modes})")
    for line in result.not_exported:
        typer.echo(f"not exported: {line}")


def register(app: typer.Typer) -> None:
    """Add the ``import`` and ``export`` groups to ``app``."""
    import_app.command("skiplist")(skiplist_cmd)
    import_app.command("disabled-tests")(disabled_import_cmd)
    export_app.command("disabled-tests")(disabled_export_cmd)
    app.add_typer(import_app, name="import")
    app.add_typer(export_app, name="export")
