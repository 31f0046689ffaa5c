"""`testcurator eval RUN_DIR`: how good were a run's decisions before execution?"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from testcurator.errors import BadInputError, MissingPathError


def _run_dir(path: Path, state_dir: Optional[Path]) -> Path:
    """RUN_DIR itself, or ``latest``: the newest run under the state directory."""
    if str(path) == "latest":
        from testcurator.memory.paths import resolve_state_dir

        latest = resolve_state_dir(state_dir) / "runs" / "latest.json"
        if not latest.exists():
            raise BadInputError(f"no run recorded under {latest.parent}")
        return Path(json.loads(latest.read_text(encoding="utf-8"))["run_dir"])
    if not path.is_dir():
        raise MissingPathError(path, "run directory")
    return path.resolve()


def eval_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory (<state-dir>/runs/<id>), or 'latest'.")],
    source: Annotated[Optional[list[str]], typer.Option(
        "--source", help="Predictions to judge, repeatable: stored (the run's own), offline, llm. "
                         "Default: stored and offline.")] = None,
    run_unrun: Annotated[bool, typer.Option(
        "--run-unrun", help="First run, on the device, the tests the draft did not execute (skipped ones).")] = False,
    state_dir: Annotated[Optional[Path], typer.Option("--state-dir", help="For 'latest' (default .testcurator/).")] = None,
    workers: Annotated[int, typer.Option("-n", "--workers", min=1, help="pytest-xdist workers for --run-unrun.")] = 1,
    llm_base_url: Annotated[Optional[str], typer.Option("--llm-base-url", help="For --source llm (else OPENAI_BASE_URL, else the run's).")] = None,
    llm_model: Annotated[Optional[str], typer.Option("--llm-model", help="For --source llm (else TESTCURATOR_LLM_MODEL, else the run's).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Judge a run's pre-execution decisions against what execution found, per mode.

    A skip that passes is lost coverage; a mandatory_success that fails is wasted device time.
    """
    from testcurator.pipelines.brain_report import RUN_FILE
    from testcurator.pipelines.evaluate import SOURCES, EvalRun, compare, execute_unrun, markdown, observed, unrun

    run_path = _run_dir(run_dir, state_dir)
    meta_path = run_path / RUN_FILE
    if not meta_path.exists():
        raise BadInputError(f"{run_path} has no {RUN_FILE}: not a finished testcurator run (only runs that reached "
                            "the report stage can be evaluated)")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    names = source or ["stored", "offline"]
    unknown = [n for n in names if n not in SOURCES]
    if unknown:
        raise BadInputError(f"unknown --source {', '.join(unknown)} (expected one of: {', '.join(SOURCES)})")
    llm = {k: v for k, v in {**(meta.get("llm") or {}), "base_url": llm_base_url, "model": llm_model}.items() if v}
    run = EvalRun(run_dir=run_path, torch_root=Path(meta["torch_root"]), profile_path=Path(meta["profile"]),
                  out_dir=Path(meta["out_dir"]), state_dir=Path(meta["state_dir"]), files=tuple(meta["files"]), llm=llm)
    err = Console(stderr=True, highlight=False)
    if run_unrun:
        from testcurator.pipelines.evaluate import StoredSource

        todo = unrun(observed(run), StoredSource().predict(run))
        err.print(f"running {len(todo)} test(s) the draft did not execute ...", markup=False)
        ran = execute_unrun(run, todo, workers=workers)
        err.print(f"{ran} variant(s) ran", markup=False)
    result = compare(run, [SOURCES[n]() for n in dict.fromkeys(names)])
    if as_json:
        typer.echo(json.dumps(result, indent=1, sort_keys=True))
        return
    out = Console(highlight=False, soft_wrap=True)
    out.print(f"{run_path}: {result['tests_observed']} test(s) with results on the device", markup=False)
    for line in markdown(result):
        out.print(line, markup=False)


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command("eval")(eval_cmd)
