"""The frozen run context every node gets through LangGraph's runtime (never in state)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from testcurator.agents.brain import BackendContext, Brain
from testcurator.config.profile import BackendProfile

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
    say: Say = field(default=_quiet, compare=False)

    @property
    def configs_dir(self) -> Path:
        return self.out_dir / "configs"

    @property
    def device(self) -> str:
        return self.profile.device.torch_name

    def backend_env(self) -> Mapping[str, str]:
        """Environment for test processes: the profile's python_path and env."""
        env = dict(self.profile.env)
        paths = [str((self.profile_path.parent / p).resolve()) for p in self.profile.python_path]
        if paths:
            env["PYTHONPATH"] = os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env.setdefault("PYTORCH_PRINT_REPRO_ON_FAILURE", "0")
        return env
