"""`testcurator eval RUN_DIR`: how good were a run's decisions before execution?"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from testcurator.cli.commands import command
from testcurator.cli.options import (EvalMemoryLimitMb, EvalSources, Format, JsonDeprecated, LlmBaseUrl, LlmModel, RunDirArg,
                                     RunUnrun, StateDir, Workers, wants_json)
from testcurator.errors import BadInputError


def _run_dir(path: Path, state_dir: Optional[Path]) -> Path:
    """RUN_DIR itself, ``latest`` (the newest run under the state directory), or the newest
    run of an --out folder; else an error that says where runs are."""
    from testcurator.cli.run_dirs import run_folder
    from testcurator.memory.paths import resolve_state_dir

    return run_folder(path, resolve_state_dir(state_dir))


def eval_cmd(
    run_dir: RunDirArg,
    source: EvalSources = None,
    run_unrun: RunUnrun = False,
    state_dir: StateDir = None,
    workers: Workers = 1,
    memory_limit_mb: EvalMemoryLimitMb = None,
    llm_base_url: LlmBaseUrl = None,
    llm_model: LlmModel = None,
    fmt: Format = "text",
    as_json: JsonDeprecated = False,
) -> None:
    """Judge a run's pre-execution decisions against what execution found, per mode.

    A skip that passes is lost coverage; a mandatory_success that fails is wasted device time.

    -n/--workers: pytest-xdist workers for --run-unrun (default 1), which runs each test under
    the run's own --memory-limit-mb unless given. --source llm asks the endpoint --llm-base-url
    and --llm-model name.
    """
    as_json = wants_json(fmt, as_json)
    from testcurator.pipelines.brain_report import RUN_FILE
    from testcurator.pipelines.evaluate import (SOURCES, EvalRun, compare, execute_unrun, markdown, observed,
                                                tried_variants, unrun)

    run_path = _run_dir(run_dir, state_dir)
    meta_path = run_path / RUN_FILE
    if not meta_path.exists():
        raise BadInputError(f"{run_path} has no {RUN_FILE}: not a finished testcurator run (only runs that reached "
                            "the report stage can be evaluated)")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    names = source or ["stored", "offline"]  # each one of SOURCES: --source's choices say so
    llm = {k: v for k, v in {**(meta.get("llm") or {}), "base_url": llm_base_url, "model": llm_model}.items() if v}
    run = EvalRun(run_dir=run_path, torch_root=Path(meta["torch_root"]), profile_path=Path(meta["profile"]),
                  out_dir=Path(meta["out_dir"]), state_dir=Path(meta["state_dir"]), files=tuple(meta["files"]), llm=llm,
                  memory_limit_mb=(meta.get("memory_limit_mb") if memory_limit_mb is None else memory_limit_mb) or None)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if run_unrun:
        from testcurator.pipelines.evaluate import StoredSource
        from testcurator.runner.progress import LineProgress

        todo = unrun(observed(run), StoredSource().predict(run), tried_variants(run))
        err.print(f"running {len(todo)} test(s) the draft did not execute, or ran without their exclusions ...", markup=False)
        # A line every few seconds: on a corpus this runs thousands of variants for minutes.
        progress = LineProgress("eval", lambda line: err.print(line, markup=False))
        ran = execute_unrun(run, todo, workers=workers, progress=progress)
        err.print(f"{ran['executed']} variant(s) executed, {ran['skipped']} skipped (by the test itself or the "
                  "profile's capabilities)", markup=False)
    result = compare(run, [SOURCES[n]() for n in dict.fromkeys(names)])
    from testcurator.pipelines.reason_check import check_run, to_json

    contradictions = check_run(run.run_dir, run.out_dir / "configs", run.torch_root, run.files)
    result["reason_check"] = to_json(contradictions)
    if as_json:
        typer.echo(json.dumps(result, indent=1, sort_keys=True))
        return
    out = Console(highlight=False, soft_wrap=True)
    out.print(f"{run_path}: {result['tests_observed']} test(s) with results on the device", markup=False)
    for line in markdown(result):
        out.print(line, markup=False)
    out.print(f"- reasons contradicted by the results: {len(contradictions)}", markup=False)
    for found in contradictions:
        out.print(f"  - {found.line()}", markup=False)


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    command(app, "eval")(eval_cmd)
