"""Finding a run from what the user typed: ``latest``, a run folder, or a run's ``--out`` folder.

A run has two folders: the run folder ``<state-dir>/runs/<id>/`` (``run.json``, the
evidence; what ``eval`` judges) and the ``--out`` folder (``configs/``, ``report.md`` and
``report.json``; what ``report`` renders). Either names the other: ``run.json`` records
``out_dir``, and the runs of an ``--out`` folder are found by it. When neither is found,
the error says what a run folder holds and lists the run folders there are.
"""

from __future__ import annotations

import json
from pathlib import Path

from testcurator.errors import BadInputError

RUN_FILE = "run.json"  # pipelines/brain_report.RUN_FILE: the run folder's record
REPORT_FILE = "report.json"
SHOWN = 5
WHAT = ("a run folder is <state-dir>/runs/<id>/ (it holds run.json; 'latest' names the newest), or the --out "
        "folder of `testcurator run` (it holds report.json)")


def _record(run_dir: Path) -> dict[str, str]:
    try:
        data = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _newest_first(paths: list[Path]) -> list[Path]:
    return sorted(paths, key=lambda p: p.stat().st_mtime, reverse=True)


def runs_of(state: Path) -> list[Path]:
    """The run folders under ``state`` that reached the report stage, newest first."""
    runs = state / "runs"
    return _newest_first([p.parent for p in runs.glob(f"*/{RUN_FILE}")]) if runs.is_dir() else []


def latest(state: Path) -> Path:
    """The run folder ``latest.json`` names under ``state``."""
    pointer = state / "runs" / "latest.json"
    if not pointer.is_file():
        raise BadInputError(f"no run recorded under {pointer.parent} (--state-dir, or $TESTCURATOR_STATE_DIR, "
                            "names where runs are)")
    return Path(json.loads(pointer.read_text(encoding="utf-8"))["run_dir"])


def run_folder(path: Path, state: Path) -> Path:
    """The run folder ``path`` names: itself, ``latest``, or the newest run of an --out folder."""
    if str(path) == "latest":
        return latest(state)
    if (path / RUN_FILE).is_file():
        return path.resolve()
    mine = [r for r in runs_of(state) if path.is_dir() and _same(_record(r).get("out_dir"), path)]
    if mine:
        return mine[0]
    raise not_a_run(path, state)


def out_folder(path: Path, state: Path) -> Path:
    """The --out folder (holding report.json) ``path`` names: itself, or a run folder's."""
    if str(path) != "latest" and (path / REPORT_FILE).is_file():
        return path.resolve()
    run = run_folder(path, state)
    recorded = _record(run).get("out_dir")
    if not recorded or not (Path(recorded) / REPORT_FILE).is_file():
        raise BadInputError(f"the run {run} has no report{f' in {recorded}' if recorded else ''}: it did not reach "
                            "the report stage (`testcurator run ... --resume` finishes it)")
    return Path(recorded)


def _same(recorded: str | None, path: Path) -> bool:
    return bool(recorded) and Path(recorded).resolve() == path.resolve()


def not_a_run(path: Path, state: Path) -> BadInputError:
    """The error for a path that is no run: what a run folder is, and the ones there are."""
    where = "does not exist" if not path.exists() else "is not a folder" if not path.is_dir() else "is not a run folder"
    found = _newest_first([p.parent for depth in ("*", "*/*", "*/*/*") for p in path.glob(f"{depth}/{RUN_FILE}")]
                          if path.is_dir() else [])[:SHOWN]
    lines = [f"{path} {where}: {WHAT}"]
    if found:
        lines.append(f"run folders under {path}: " + ", ".join(str(p) for p in found))
    runs = runs_of(state)
    if runs:
        lines.append(f"runs under {state / 'runs'}, newest first: "
                     + ", ".join(p.name for p in runs[:SHOWN]) + (" ..." if len(runs) > SHOWN else ""))
    elif not found:
        lines.append(f"no run recorded under {state / 'runs'} (--state-dir names where runs are)")
    return BadInputError("\n".join(lines))
