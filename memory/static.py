"""The static test-to-op map: one collect-only pass with the capture plugin.

Before anything runs, collection already knows every instance's generic name, device,
dtype, OpInfo (and its aten op) and ModuleInfo: PyTorch's device-generic machinery
instantiates them from the real ``op_db``/``module_db``. This writes them as capture
records (JSON lines) that :class:`~testcurator.memory.opmap.OpMap` ingests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from testcurator.errors import ExecutionError
from testcurator.runner.command import UNRELATED_PLUGINS_OFF

QUIET_PLUGINS = ("-p", "no:cacheprovider", *UNRELATED_PLUGINS_OFF)


def reference_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for reference runs on CPU, whatever backend the user targets."""
    env = dict(os.environ)
    env["PYTORCH_TESTING_DEVICE_ONLY_FOR"] = "cpu"
    env["PYTORCH_PRINT_REPRO_ON_FAILURE"] = "0"
    env.update(extra or {})
    return env


def collect_static(torch_root: Path, files: Sequence[str], out: Path, log: Path) -> Path:
    """Collect ``files`` (relative to ``torch_root``) and write their static records to ``out``."""
    tmp = out.with_name(out.name + ".part")
    # One upstream file that cannot be collected (a missing optional dependency) must not
    # cost the map of all the others.
    cmd = [sys.executable, "-m", "pytest", "-q", *QUIET_PLUGINS, "--collect-only", "--continue-on-collection-errors",
           f"--curate-capture-ops={tmp}", *files]
    with log.open("w", encoding="utf-8") as handle:
        proc = subprocess.run(cmd, cwd=torch_root, stdout=handle, stderr=subprocess.STDOUT, env=reference_env(), check=False)
    # 1: some files failed to collect (their errors are in the log); 5: nothing collected
    # (e.g. a tree of CUDA-only files) is a valid, empty map.
    if proc.returncode not in (0, 1, 5) or not tmp.exists():
        raise ExecutionError(f"collecting {len(files)} file(s) failed (pytest exit {proc.returncode}); see {log}")
    tmp.replace(out)
    return out
