"""The frozen run context every node gets through LangGraph's runtime (never in state)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from testcurator.agents.brain import BackendContext, Brain
from testcurator.config.profile import BackendProfile, backend_run_env

Say = Callable[[str], None]


def _quiet(message: str) -> None:
    return None


@dataclass(frozen=True)
class RunContext:
    """Dependencies and thresholds of one pipeline run."""

    torch_root: Path
    profile: BackendProfile
    profile_path: Path
    out_dir: Path
    state_dir: Path
    brain: Brain
    backend: BackendContext
    execute: bool = True
    capture_ops: bool = True
    embed: bool = True
    workers: int = 1
    timeout: float = 300.0
    retries: int = 1
    # Where the heavy steps (CPU op capture, draft execution, verification) run, in how
    # many shards (runner/executors.py, runner/shardrun.py).
    executor: str = "local"
    shards: int = 1
    # Delta mode (testcurator upgrade): only these ``file::generic`` tests are bucketed, run,
    # refined and emitted; every other entry of the configs is left as it is. None: all tests.
    only_tests: frozenset[str] | None = None
    say: Say = field(default=_quiet, compare=False)

    @property
    def configs_dir(self) -> Path:
        return self.out_dir / "configs"

    @property
    def delta(self) -> bool:
        return self.only_tests is not None

    def selected(self, rel: str, generic: str) -> bool:
        """Whether test ``rel::generic`` is (re-)evaluated by this run."""
        return self.only_tests is None or f"{rel}::{generic}" in self.only_tests

    def run_files(self, files: Sequence[str]) -> list[str]:
        """The kept files this run decides: all of them, or those holding a delta test."""
        if self.only_tests is None:
            return list(files)
        touched = {key.split("::", 1)[0] for key in self.only_tests}
        return [f for f in files if f in touched]

    @property
    def device(self) -> str:
        return self.profile.device.torch_name

    def backend_env(self) -> Mapping[str, str]:
        """Environment for test processes: the profile's python_path and env."""
        return backend_run_env(self.profile, self.profile_path)
