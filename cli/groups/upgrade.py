"""`testcurator upgrade` and `testcurator enable-op`: change a curated config by a delta."""

from __future__ import annotations

import typer
from rich.console import Console

from testcurator.cli.commands import command, invocation
from testcurator.cli.paths import removing_if_created
from testcurator.cli.options import (Backend, BackendReq, Brain, CaptureAll, CaptureOps, ConfigReq, DryRun, Embed, EnableOpArg,
                                     Execute, ExecutorName, LlmBaseUrl, LlmBudget, LlmModel, NewRoot, OldRoot, OutDirReq, Probe,
                                     Retries, Shards, StateDir, Timeout, TorchRoot, Workers)
from testcurator.memory.paths import resolve_state_dir


def upgrade_cmd(
    old_root: OldRoot,
    new_root: NewRoot,
    config: ConfigReq,
    out: OutDirReq,
    backend: BackendReq,
    brain: Brain = "offline",
    execute: Execute = True,
    state_dir: StateDir = None,
    workers: Workers = 1,
    timeout: Timeout = 300.0,
    retries: Retries = 1,
    embed: Embed = True,
    capture_ops: CaptureOps = True,
    capture_all: CaptureAll = False,
    probe: Probe = True,
    llm_base_url: LlmBaseUrl = None,
    llm_model: LlmModel = None,
    llm_budget_s: LlmBudget = None,
    executor: ExecutorName = "local",
    shards: Shards = 1,
) -> None:
    """Move a config to a new upstream tree: re-evaluate only added and changed tests, carry the rest.

    --config is the old tree's configs directory; --out receives configs/, upgrade.md/.json
    and report.md.

    Exit codes: 0 done (a delta run has no verification run); 2 bad input (a backend module
    that does not import included); 3 infrastructure failure (pytest could not run the
    delta's tests, or its results are cut short).
    """
    from testcurator.pipelines.context import RunContext
    from testcurator.pipelines.upgrade.workflow import UpgradeOptions, run_upgrade

    console = Console(highlight=False, soft_wrap=True)  # node ids, paths and Markdown rows stay whole
    run = RunContext.create(torch_root=new_root, backend=backend, out_dir=out, state_dir=resolve_state_dir(state_dir),
                            brain=brain, llm_base_url=llm_base_url, llm_model=llm_model, llm_budget_s=llm_budget_s, execute=execute,
                            workers=workers or 1, timeout=timeout, retries=retries, embed=embed, capture_ops=capture_ops, probe=probe,
                            capture_all=capture_all, executor=executor, shards=shards, say=lambda message: console.print(message, markup=False))
    from testcurator.lock import hold, run_locks

    # A folder it made goes again when the upgrade stops before writing in it; another run on
    # the same state dir or --out is refused (README "Two runs at once").
    with removing_if_created(out), hold(run_locks(run.state_dir, out), invocation(), say=run.say):
        data = run_upgrade(UpgradeOptions(old_root=old_root, config=config, run=run))
    if (out / "report.json").is_file():
        from testcurator.pipelines.report import finish_report

        finish_report(out, invocation())  # a delta run has no verification: its exit code is 0
    console.print(f"done: {data['evaluated']}; configs in {out / 'configs'}", markup=False)


def enable_op_cmd(
    op: EnableOpArg,
    config: ConfigReq,
    torch_root: TorchRoot = None,
    backend: Backend = None,
    execute: Execute = False,
    state_dir: StateDir = None,
    dry_run: DryRun = False,
    timeout: Timeout = 300.0,
    probe: Probe = True,
) -> None:
    """Admit the tests held back only by OP: a config delta; with --execute, validated on the device.

    --config is changed in place; --backend is needed for --execute; without --torch-root
    (or $TORCH_ROOT) the memory's torch root is used. With --backend, the capability table is
    consulted first: the admitted tests' calls it lacks are replayed on the device, OP's rows
    are shown, and a test whose calls the device still lacks is not admitted (--no-probe: not
    checked).

    Exit codes: 0 done (with --execute, admitted tests that fail on the device are written
    back as xfail_strict, so the config holds); 2 bad input; 3 infrastructure failure
    (pytest could not run the admitted tests, ran none, or its results are cut short).
    """
    from testcurator.pipelines.enable_op.admission import EnableOptions
    from testcurator.pipelines.enable_op.workflow import enable_op

    console = Console(highlight=False, soft_wrap=True)  # node ids, paths and Markdown rows stay whole
    result = enable_op(EnableOptions(op=op, config=config, state_dir=resolve_state_dir(state_dir),
                                     torch_root=torch_root, backend=backend, execute=execute, dry_run=dry_run,
                                     timeout=timeout, probe=probe), lambda message: console.print(message, markup=False))
    console.print(result.summary(), markup=False)


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    command(app, "upgrade")(upgrade_cmd)
    command(app, "enable-op")(enable_op_cmd)
