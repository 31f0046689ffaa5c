"""The static test-to-op map: one collect-only pass with the capture plugin.

Before anything runs, collection already knows every instance's generic name, device,
dtype, OpInfo (and its aten op) and ModuleInfo: PyTorch's device-generic machinery
instantiates them from the real ``op_db``/``module_db``. This writes them as capture
records (JSON lines) that :class:`~testcurator.memory.opmap.OpMap` ingests.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from testcurator.errors import ExecutionError
from testcurator.runner.command import pytest_argv, reference_env, run_logged


def collect_static(torch_root: Path, files: Sequence[str], out: Path, log: Path) -> Path:
    """Collect ``files`` (relative to ``torch_root``) and write their static records to ``out``."""
    tmp = out.with_name(out.name + ".part")
    # One upstream file that cannot be collected (a missing optional dependency) must not
    # cost the map of all the others.
    argv = pytest_argv("-q", "--collect-only", "--continue-on-collection-errors", f"--curate-capture-ops={tmp}", *files)
    returncode = run_logged(argv, cwd=torch_root, env=reference_env(), log=log)
    # 1: some files failed to collect (their errors are in the log); 5: nothing collected
    # (e.g. a tree of CUDA-only files) is a valid, empty map.
    if returncode not in (0, 1, 5) or not tmp.exists():
        raise ExecutionError(f"collecting {len(files)} file(s) failed (pytest exit {returncode}); see {log}")
    tmp.replace(out)
    return out
