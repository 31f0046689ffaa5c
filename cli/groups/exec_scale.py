"""What `exec`'s scale-out options add to a run: shards, feature group, tier, executor,
backend profile and durations (kept out of ``groups/exec.py`` so that module stays the command).

:func:`prepare` checks the options (bad input before anything runs) and returns the run
spec with them applied, the executor, and the durations store the run records into. A
leg (``--shard K/N``) splits by its matrix's frozen durations snapshot, not by the store
it records into (``runner/shards/snapshot.py``: issue 22).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from testcurator.errors import BadInputError
from testcurator.runner.command import RunSpec
from testcurator.runner.shards.durations import DurationStore
from testcurator.runner.shards.executors import Executor, ExecutorOptions
from testcurator.runner.shards.registry import make_executor


@dataclass(frozen=True)
class ScaleOptions:
    shard: str | None = None
    shards: int = 1
    group: str | None = None
    tier: str | None = None
    tiers_file: Path | None = None
    executor: str = "local"
    profile: Path | None = None
    durations: Path | None = None
    state_dir: Path | None = None
    refresh_snapshot: bool = False


def prepare(spec: RunSpec, opts: ScaleOptions, say: Callable[[str], None]) -> tuple[RunSpec, Executor, DurationStore]:
    from testcurator.sharding import ShardRef

    if opts.shard is not None and opts.shards > 1:
        raise BadInputError("exec: --shard K/N runs one shard, --shards N runs them all: give one of them")
    if opts.refresh_snapshot and opts.shard is None:
        raise BadInputError("exec: --refresh-snapshot goes with --shard K/N (--shards N reads the durations once anyway)")
    spec = replace(spec, shard=str(ShardRef.parse(opts.shard)) if opts.shard else None,
                   paths=spec.paths + _group_paths(spec, opts.group),
                   extra_args=spec.extra_args + tier_args(opts.tier, opts.tiers_file, spec.config))
    resources: dict[str, float] = {}
    if opts.profile is not None:
        from testcurator.config.profile import load_profile

        profile = load_profile(opts.profile, check_paths=False)[0]
        resources = dict(profile.resources)
        spec = replace(spec, device=spec.device or profile.device.torch_name,
                       backend=spec.backend or profile.backend_module,
                       env=tuple(sorted(profile.test_env(opts.profile).items())))
    executor = make_executor(opts.executor, ExecutorOptions(resources=resources, say=say))
    store = durations_store(opts.state_dir, opts.durations)
    if spec.shard is not None:
        spec = replace(spec, durations=leg_snapshot(spec, store, opts, say))
    return spec, executor, store


def leg_snapshot(spec: RunSpec, store: DurationStore, opts: ScaleOptions, say: Callable[[str], None]) -> Path:
    """The frozen durations this leg splits by: its matrix's snapshot, taken now if it is the
    first leg (or ``--refresh-snapshot``), else the one an earlier leg or ``shards plan`` took."""
    from testcurator.runner.shards.snapshot import current_durations, freeze, snapshot_key

    key = snapshot_key(spec.config, spec.paths, spec.device, opts.durations)
    snapshot = freeze(store.path.parent, key, lambda: current_durations(store, spec.device, opts.durations),
                      refresh=opts.refresh_snapshot)
    how = "taken now" if snapshot.taken else "taken by an earlier leg or `shards plan`; --refresh-snapshot takes a new one"
    say(f"shard {spec.shard} splits by the durations snapshot {snapshot.path} ({how})")
    return snapshot.path


def check_backend_imports(spec: RunSpec, profile: Path | None) -> None:
    """The backend module imports where pytest will run (bad input, exit 2, before any run)."""
    if not spec.backend:
        return
    from testcurator.runner.command import build_env
    from testcurator.runner.preflight import check_backend

    where = f"{profile}: backend_module" if profile is not None else "--backend"
    check_backend(spec.backend, env=build_env(spec), cwd=spec.cwd, where=where)


def _group_paths(spec: RunSpec, group: str | None) -> tuple[str, ...]:
    if group is None:
        return ()
    if spec.config is None:
        raise BadInputError("exec: --group needs --config (the group narrows the config's files)")
    from testcurator.pipelines.shard_plan import group_paths

    return tuple(group_paths(spec.config, spec.torch_root, group))


def tier_args(tier: str | None, tiers_file: Path | None, config: Path | None) -> tuple[str, ...]:
    """pytest options that select a tier (plugin/tiers.py); checked here, before any run."""
    from testcurator.tiers import TIERS, read_l1_keys

    if tier is None:
        return ()
    if tier not in TIERS:
        raise BadInputError(f"--tier {tier!r}: expected one of {', '.join(TIERS)}")
    if tier == "L3" and config is None:
        raise BadInputError("--tier L3 needs --config (it probes what the config holds back)")
    if tier != "L1":
        return (f"--curate-tier={tier}",)
    if tiers_file is None:
        if config is None:
            raise BadInputError("--tier L1 needs --tiers-file or --config (tiers.json beside it)")
        from testcurator.pipelines.tiers import default_tiers_file

        tiers_file = default_tiers_file(config)
    read_l1_keys(tiers_file)  # a missing or bad file is bad input now, not a pytest usage error later
    return (f"--curate-tier={tier}", f"--curate-tier-file={tiers_file.resolve()}")


def durations_store(state_dir: Path | None, durations: Path | None) -> DurationStore:
    """The state dir's durations, with a pytest-split file merged in when given."""
    from testcurator.memory.paths import resolve_state_dir

    store = DurationStore(resolve_state_dir(state_dir))
    if durations is not None:
        store.import_file(durations)
    return store
