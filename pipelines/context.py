"""The run context: everything one pipeline run depends on, in one frozen object.

In the style of LangGraph's ``context.py`` templates: one keyword-only dataclass whose
fields say what they are for. The CLI builds it (:meth:`RunContext.create`, which loads the
backend profile, discovers the ops its source registers and makes the brain); the graph
reads it through ``runtime.context`` and never puts it in the state, so a checkpoint holds
no brain and no profile.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testcurator.agents.brain import BackendContext, Brain, BrainSettings
from testcurator.agents.registry import make_brain
from testcurator.agents.decision import FileDecision
from testcurator.config.profile import BackendProfile, load_profile
from testcurator.errors import BadInputError, MissingPathError
from testcurator.memory.capture_run import DEFAULT_CAPTURE_BUDGET_S
from testcurator.memory.capture_select import RuleOut
from testcurator.memory.stage import delta_files
from testcurator.runner.warm import WarmPytest
from testcurator.vocab import TestKey

Say = Callable[[str], None]


def _quiet(message: str) -> None:
    return None


def _field(description: str, **kwargs: Any) -> Any:
    return field(metadata={"description": description}, **kwargs)


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """Dependencies and settings of one pipeline run."""

    torch_root: Path = _field("The upstream tree (holds test/), resolved.")
    profile_path: Path = _field("The backend profile (backend.yaml), resolved.")
    out_dir: Path = _field("Where configs/ and the report go, resolved.")
    state_dir: Path = _field("Memory, caches, runs and checkpoints, resolved.")
    profile: BackendProfile = _field("The loaded backend profile.")
    backend: BackendContext = _field("What brains know of the backend: profile plus discovered ops.")
    brain: Brain = _field("The brain every stage asks (offline or llm).")
    execute: bool = _field("Run the draft on the device and refine from the results.", default=True)
    resume: bool = _field("Continue the last run from its checkpoint.", default=False)
    capture_ops: bool = _field("Run the kept tests once on CPU to map them to aten ops.", default=True)
    capture_budget_s: float | None = _field(
        "The most the CPU op capture may cost, in estimated CPU seconds (memory/capture_select.py samples "
        "further when what can matter would cost more); None: no limit.", default=None)
    capture_all: bool = _field(
        "Capture every CPU instance the device instantiates, also those the profile rules out (a dtype outside "
        "supported_dtypes, complex or quantized without its hook), and with no default budget.", default=False)
    probe: bool = _field("Replay the captured calls on the device before bucketing (pipelines/probe.py).",
                         default=True)
    embed: bool = _field("Per-test embeddings (similar tests as evidence).", default=True)
    workers: int = _field("pytest-xdist workers for test runs.", default=1)
    timeout: float = _field("Seconds before a hanging test is killed.", default=300.0)
    memory_limit_mb: float | None = _field(
        "MB of memory one test may add to the process running it (testcurator/memlimit.py); an allocation past it "
        "fails the test as memory_limit. None: no limit.", default=None)
    recycle_mb: float | None = _field(
        "MB of its own memory past which a process that runs tests is replaced by a fresh fork of the collected "
        "session (plugin/forks/): what thousands of tests leave behind is let go. None: tests run in the process "
        "that collected them (the default: opt in with run --recycle-mb).", default=None)
    retries: int = _field("Reruns of failing tests (flaky vs consistent).", default=1)
    executor: str = _field("Where the heavy steps (CPU op capture, draft execution, verification) run: "
                           "local or ray (runner/shards/executors.py).", default="local")
    shards: int = _field("How many shards each heavy step is split into (runner/shards/run.py).", default=1)
    only_tests: frozenset[TestKey] | None = _field(
        "Delta mode (testcurator upgrade): only these tests are bucketed, run, refined and emitted; "
        "every other entry of the configs is left as it is. None: all tests.", default=None)
    recheck_files: frozenset[str] = _field(
        "Delta mode: files collected to see whether they still import although none of their tests is "
        "re-evaluated (their source changed); one that does not is skipped as a whole.", default=frozenset())
    warm: WarmPytest | None = _field(
        "Delta mode: a pytest started ahead for the op capture (runner/warm.py), which testcurator upgrade "
        "starts while it compares the trees; None: every pytest starts when it is needed.",
        default=None, compare=False)
    scope: tuple[FileDecision, ...] | None = _field(
        "Scope decisions made before the graph (testcurator upgrade decides scope to compute its "
        "delta); None: the scope node asks the brain.", default=None)
    accept_regressions: bool = _field(
        "Write the changes refine proposes for tonight's regressions (demotions, new exclusions); without it the "
        "standing entries of regressed tests stay until a person accepts (pipelines/nights/assess.py).", default=False)
    reuse_within_s: float = _field(
        "A run whose key (backend, torch, tree, testcurator, settings, the configs in --out) equals that of the "
        "last run of --out, which ended with exit 0 at most this many seconds ago, runs nothing: that run's results "
        "stand (pipelines/nights/uptodate.py). 0: always run.", default=0.0)
    history_keep: int = _field("Runs whose outcomes the history keeps (memory/history.py); older ones are compacted.",
                               default=60)
    checked: bool = _field(
        "Whether the preflight checks (:meth:`preflight`) ran in :meth:`create`; False: the run runs them "
        "itself once it knows it will run anything (pipelines/nightly/run.py, after the up-to-date check).",
        default=True, compare=False)
    say: Say = _field("Where progress lines go.", default=_quiet, compare=False)

    @classmethod
    def create(cls, *, torch_root: Path, backend: Path, out_dir: Path, state_dir: Path, brain: str = "offline",
               llm_base_url: str | None = None, llm_model: str | None = None, llm_budget_s: float | None = None,
               preflight: bool = True, **settings: Any) -> RunContext:
        """Load the profile, discover its ops, make the brain; ``settings`` are the fields
        above with defaults (``execute``, ``workers``, ``say``...). ``preflight`` False leaves
        :meth:`preflight` to the caller (``testcurator run``: a run that would only repeat the
        last one runs nothing, the checks included)."""
        if not torch_root.is_dir():
            raise MissingPathError(torch_root, "torch root")
        profile, paths = load_profile(backend)
        if preflight:
            _preflight(profile, backend, torch_root, state_dir)
        if settings.get("capture_budget_s") is None and not settings.get("capture_all"):
            settings["capture_budget_s"] = DEFAULT_CAPTURE_BUDGET_S
        return cls(torch_root=torch_root.resolve(), profile_path=backend.resolve(), out_dir=out_dir.resolve(),
                   state_dir=state_dir.resolve(), profile=profile,
                   brain=_brain(brain, state_dir, llm_base_url, llm_model, llm_budget_s, settings.get("say")),
                   backend=_backend_context(profile, paths["source_paths"]), checked=preflight, **settings)

    def preflight(self) -> None:
        """Bad input before any test runs: the backend module does not import where the tests
        will run, or pytest breaks in the tree under its own pytest.ini and conftest.py."""
        _preflight(self.profile, self.profile_path, self.torch_root, self.state_dir)

    @property
    def configs_dir(self) -> Path:
        return self.out_dir / "configs"

    @property
    def delta(self) -> bool:
        return self.only_tests is not None

    def selected(self, rel: str, generic: str) -> bool:
        """Whether test ``rel::generic`` is (re-)evaluated by this run."""
        return self.only_tests is None or TestKey.of(rel, generic) in self.only_tests

    def run_files(self, files: Sequence[str]) -> list[str]:
        """The kept files this run decides: all of them, or those holding a delta test."""
        return list(files) if self.only_tests is None else delta_files(files, self.only_tests)

    @property
    def device(self) -> str:
        return self.profile.device.torch_name

    def capture_rule_out(self) -> RuleOut | None:
        """What the CPU op capture need not run: what the profile rules out (pipelines/capture_rules.py);
        None with capture_all."""
        from testcurator.pipelines.capture_rules import capture_rule_out

        return None if self.capture_all else capture_rule_out(self.profile, self.backend, self.torch_root,
                                                              self.state_dir)

    def backend_env(self) -> dict[str, str]:
        """Environment for test processes: the profile's python_path and env."""
        return self.profile.test_env(self.profile_path)


def _preflight(profile: BackendProfile, path: Path, torch_root: Path, state_dir: Path) -> None:
    """Both checks at once (each waits on a child process: a second's pytest start beside the
    backend's import, in a run's critical path); the backend's error is raised first."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="preflight") as pool:
        checks = [pool.submit(_check_backend, profile, path, torch_root), pool.submit(_check_harness, torch_root, state_dir)]
    for check in checks:
        check.result()


def _check_backend(profile: BackendProfile, path: Path, torch_root: Path) -> None:
    """The profile's backend module imports where the tests will run: else bad input now,
    not empty test runs after minutes of indexing."""
    if not profile.backend_module:
        return
    import os

    from testcurator.runner.preflight import check_backend

    env = {**os.environ, **profile.test_env(path.resolve())}
    check_backend(profile.backend_module, env=env, cwd=torch_root.resolve(), where=f"{path}: backend_module")


def _check_harness(torch_root: Path, state_dir: Path) -> None:
    """pytest starts in the tree under its own pytest.ini and conftest.py: else bad input now,
    named by file and line, not an internal error from the first collection."""
    from testcurator.runner.command import reference_env
    from testcurator.runner.preflight import check_harness

    check_harness(torch_root, env=reference_env(), log=state_dir.resolve() / "preflight" / "harness.log")


def _backend_context(profile: BackendProfile, sources: list[Path]) -> BackendContext:
    registered: frozenset[str] = frozenset()
    has_fallback = False
    if profile.discover_ops and sources:
        from testcurator.memory.discover import discover_ops

        found = discover_ops(sources, profile.device.torch_name)
        registered, has_fallback = found.ops("aten"), found.has_fallback
    return BackendContext.from_profile(profile, registered_ops=registered, has_fallback=has_fallback)


def _brain(name: str, state_dir: Path, llm_base_url: str | None, llm_model: str | None, llm_budget_s: float | None,
           say: Say | None) -> Brain:
    llm = None
    if name == "llm":
        from testcurator.config.llm import LLMSettings

        llm = LLMSettings.from_env(base_url=llm_base_url, model=llm_model, budget_s=llm_budget_s)
        if llm is None:
            raise BadInputError("--brain llm needs an endpoint: set OPENAI_BASE_URL (or --llm-base-url); "
                                "testcurator never calls the public API by default")
    return make_brain(name, BrainSettings(llm=llm, state_dir=state_dir, say=say))
