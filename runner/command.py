"""What to run and how: the run specification, the selection, and the pytest command line.

A run is either *curated* (``config`` given: the config's ``files`` entries resolved against
``torch_root``, and ``--curate-config`` applies the modes) or a *draft* (``paths`` given:
files or node ids, no config). Node-id lists go through pytest's ``@argsfile`` so a rerun
of thousands of remaining tests never hits the OS argument limit, and are passed
explicitly rather than by ``--deselect`` (which matches by prefix: deselecting
``test_a`` would also drop ``test_ab``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from testcurator.errors import BadInputError
from testcurator.runner.partition import plan_path
from testcurator.vocab import TestKey


@dataclass(frozen=True)
class RunSpec:
    """Everything ``execute`` needs; ``paths`` (when given) narrows a config's files."""

    out_dir: Path
    paths: tuple[str, ...] = ()
    config: Path | None = None
    torch_root: Path | None = None
    device: str | None = None
    backend: str | None = None
    workers: int = 1
    timeout: float | None = 300.0
    memory_limit_mb: float | None = None  # --curate-memory-limit: what one test may add to its process
    # --curate-recycle: tests run in a process forked from the collected session, replaced once
    # it holds more than this (plugin/forks/); None: in the process that collected them
    recycle_mb: float | None = None
    retries: int = 1
    rootdir: Path | None = None
    extra_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    unrelated_plugins_off: bool = False  # True for the runs the pipeline makes for itself
    command: tuple[str, ...] = field(default_factory=lambda: tuple(sys.argv))
    shard: str | None = None  # "K/N": only that shard of the selection (testcurator.sharding)
    durations: Path | None = None  # pytest-split .test_durations file the shard split reads (a leg: the snapshot)
    # ``file::Class::test`` keys whose failures are not retried: they fail on CPU too, the same way
    # (upstream test_testing's 1,162 OpInfoSampleFunctions instances: 4 minutes of a corpus draft)
    settled: frozenset[str] = frozenset()
    # Dtypes whose tests each run in a forked process (--curate-isolate, plugin/isolate.py): the
    # dtypes of calls the probe saw kill the process, so a crash costs a fork, not a worker.
    isolate: frozenset[str] = frozenset()
    # Of those, the instances (tier keys, in this file) that run in the process all the same
    # (--curate-isolate-except): their calls are known and none is of an op the probe saw crash;
    # and those forked whatever their dtype (--curate-isolate-also): they call such an op.
    isolate_except: Path | None = None
    isolate_also: Path | None = None

    @property
    def cwd(self) -> Path:
        return (self.rootdir or self.torch_root or Path.cwd()).resolve()


@dataclass(frozen=True)
class Selection:
    """The test files or node ids a run starts from, and config files that are absent."""

    targets: tuple[str, ...]
    missing: tuple[str, ...] = ()


def _absolute(target: str) -> str:
    # pytest runs in spec.cwd; a path the user gave is relative to where they stand.
    key = TestKey.parse(target)
    return str(replace(key, file=str(Path(key.file).resolve()))) if Path(key.file).exists() else target


def select(spec: RunSpec) -> Selection:
    """Resolve what to run; a config file that lists absent test files keeps the rest."""
    if spec.paths:
        return Selection(tuple(_absolute(p) for p in spec.paths))
    if spec.config is None:
        raise BadInputError("nothing to run: give --config or test paths")
    from testcurator.config.loader import load_config

    loaded = load_config(spec.config, torch_root=spec.torch_root.resolve() if spec.torch_root else None)
    present = [str(f.resolved_path) for f in loaded.files if f.resolved_path.exists()]
    missing = [str(f.resolved_path) for f in loaded.files if not f.resolved_path.exists()]
    if not present:
        raise BadInputError(f"{spec.config}: none of the config's {len(missing)} test file(s) exist "
                            f"(first: {missing[0] if missing else '-'}); check --torch-root")
    return Selection(tuple(present), tuple(missing))


def shard_args(spec: RunSpec) -> list[str]:
    """Options that split the collection; only the first pytest of a run gets them (later
    ones rerun named node ids, which must not be split again). That pytest also writes the
    leg's plan, which the manifest carries for merges to check (``runner/partition.py``)."""
    if spec.shard is None:
        return []
    durations = [f"--curate-durations={spec.durations.resolve()}"] if spec.durations else []
    return [f"--curate-shard={spec.shard}", *durations, f"--curate-shard-plan={plan_path(spec.out_dir.resolve())}"]


def _autoload_disabled(env: dict[str, str]) -> bool:
    return bool(env.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"))


# Third-party pytest plugins installed beside us that cost ~2 s per process start and have
# nothing to do with running upstream tests: every pytest testcurator starts for itself
# (capture, collection for the op map, draft, verification) turns them off.
UNRELATED_PLUGINS_OFF = ("-p", "no:hypothesispytest", "-p", "no:anyio", "-p", "no:langsmith_plugin")


# How every pytest testcurator starts begins: this interpreter, pytest as a module.
PYTHON_M_PYTEST = (sys.executable, "-m", "pytest")


def pytest_argv(*args: str, unrelated_off: bool = True) -> list[str]:
    """The argv of one ``python -m pytest`` run: the one place testcurator spells it.

    This interpreter, no cache provider (runs never write into the upstream tree), and the
    unrelated plugins off unless ``unrelated_off`` is False (a user's own ``exec`` run, or a
    collection whose keywords must match what the user's pytest sees).
    """
    return [*PYTHON_M_PYTEST, "-p", "no:cacheprovider",
            *(UNRELATED_PLUGINS_OFF if unrelated_off else ()), *args]


def reference_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for reference runs on CPU, whatever backend the user targets."""
    env = dict(os.environ)
    env["PYTORCH_TESTING_DEVICE_ONLY_FOR"] = "cpu"
    env["PYTORCH_PRINT_REPRO_ON_FAILURE"] = "0"
    env.update(extra or {})
    return env


def run_logged(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], log: Path,
               timeout_s: float | None = None) -> int:
    """Run ``argv`` with its output in ``log``; the exit code (test failures are data)."""
    with log.open("w", encoding="utf-8") as out:
        return subprocess.run(list(argv), cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=dict(env),
                              check=False, timeout=timeout_s).returncode


def run_bounded(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], log: Path,
                limit_s: float | None) -> tuple[int, bool]:
    """:func:`run_logged` in a session of its own, stopped with everything it started (xdist's
    workers) once it has run ``limit_s`` seconds: (its exit code, whether it was stopped)."""
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.Popen(list(argv), cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=dict(env),
                                start_new_session=True)
        try:
            return proc.wait(timeout=limit_s), False
        except subprocess.TimeoutExpired:
            stop_session(proc)
            return proc.returncode, True
        except BaseException:
            stop_session(proc)
            raise


def stop_session(proc: subprocess.Popen[bytes]) -> None:
    """End a process started with a session of its own, and what it started: SIGTERM, then SIGKILL."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def build_env(spec: RunSpec) -> dict[str, str]:
    env = dict(os.environ)
    env.update(dict(spec.env))
    if spec.device:
        # instantiate_device_type_tests reads this at import: only the backend's classes.
        env.setdefault("PYTORCH_TESTING_DEVICE_ONLY_FOR", spec.device)
    if spec.torch_root is not None:
        env.setdefault("TORCH_ROOT", str(spec.torch_root.resolve()))
    return env


def pytest_command(
    spec: RunSpec, targets: Sequence[str], *, events: Path, junit: Path, argsfile: Path,
    workers: int, env: dict[str, str],
) -> list[str]:
    """The argv of one pytest invocation over ``targets``."""
    argsfile.parent.mkdir(parents=True, exist_ok=True)
    argsfile.write_text("".join(f"{t}\n" for t in targets), encoding="utf-8")
    cmd = pytest_argv(f"@{argsfile}", "--continue-on-collection-errors", "-q", "--junitxml", str(junit),
                      "--curate-events", str(events), unrelated_off=spec.unrelated_plugins_off)
    if _autoload_disabled(env):
        # Plugins are not picked up from entry points then: name ours (and xdist's).
        cmd += ["-p", "testcurator.plugin.entry"] + (["-p", "xdist.plugin"] if workers > 1 else [])
    if spec.unrelated_plugins_off:
        # The pipeline's own runs read failures from the JUnit XML, which --tb=native fills
        # as PyTorch's pytest.ini does. pytest's default long style parses each frame's file
        # to find its statement: on a tree whose ini does not ask otherwise that is ~0.25 s
        # a failure (common_methods_invocations.py alone is 25,000 lines), a fifth of a
        # small draft's process.
        cmd.append("--tb=native")
    if spec.timeout:
        cmd += ["--curate-timeout", str(spec.timeout)]
    if spec.memory_limit_mb:
        cmd += ["--curate-memory-limit", f"{spec.memory_limit_mb:g}"]
    if spec.recycle_mb:
        cmd += ["--curate-recycle", f"{spec.recycle_mb:g}"]
    if spec.config is not None:
        # The config's skips are settled at collection: the runner's JUnit XML is written from
        # the event log, where they are recorded (plugin/events.py).
        cmd += ["--curate-config", str(spec.config.resolve()), "--curate-settle-skips"]
        if spec.torch_root is not None:
            cmd += ["--curate-torch-root", str(spec.torch_root.resolve())]
    if spec.backend:
        backend = Path(spec.backend)
        cmd += ["--curate-backend", str(backend.resolve()) if backend.exists() else spec.backend]
    if spec.isolate:
        cmd.append(f"--curate-isolate={','.join(sorted(spec.isolate))}")
        for option, path in (("except", spec.isolate_except), ("also", spec.isolate_also)):
            if path is not None:
                cmd += [f"--curate-isolate-{option}", str(path.resolve())]
    if workers > 1:
        cmd += ["-n", str(workers)]
    return cmd + tree_options(spec.cwd, argsfile.parent) + list(spec.extra_args)


def tree_options(root: Path, work: Path) -> list[str]:
    """What pins a pytest to the upstream tree at ``root``: its rootdir (node ids relative to
    the tree, whatever else the command line names), the tree's own config or an empty one
    written to ``work`` (:func:`_inifile`), and its conftest.py files.

    Without them pytest takes the common ancestor of the working directory and every
    argument it cannot yet tell from a path (at that point our plugin's options are unknown:
    ``--curate-only FILE`` names a file in the state directory) as the rootdir of a tree
    with no config of its own: the delta capture's node ids then began with the tree's own
    folder name and matched no test (seen on upstream files in a folder of their own).
    """
    # --confcutdir: with the empty ini in the state dir, pytest would stop looking for the
    # tree's conftest.py files at that ini's folder and load none of them.
    return ["--rootdir", str(root), "-c", str(_inifile(root, work)), "--confcutdir", str(root)]


INI_NAMES = ("pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")


def _inifile(root: Path, work: Path) -> Path:
    """The upstream tree's own pytest config, or an empty one; never an unrelated ancestor's.

    pytest would otherwise look for its config from the @argsfile's folder upwards (inside
    the state directory), and could pick up the config of whatever project holds that,
    with its addopts, plugins and rootdir.
    """
    for name in INI_NAMES:
        candidate = root / name
        if candidate.is_file() and (name != "pyproject.toml" or "[tool.pytest.ini_options]" in candidate.read_text(errors="replace")):
            return candidate
    empty = work / "empty-pytest.ini"
    empty.write_text("[pytest]\n", encoding="utf-8")
    return empty
