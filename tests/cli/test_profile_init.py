"""`testcurator profile init`: a backend profile drafted by probing, through the installed command.

The backends are real: the curatedev example (its allowlist decides which dtypes work), a
variant of it written here whose kernels segfault, abort and hang under three checks, and
OpenReg when it is installed. Each probe imports the backend in its own processes, so no
device is registered in this one.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from testcurator.config.profile import load_profile

ROOT = Path(__file__).resolve().parents[2]
BACKEND_DIR = ROOT / "examples" / "backend"
ENTRY_POINT = Path(sys.executable).with_name("testcurator")
PROGRESS = re.compile(r"^\s+(dtype|hook)\s+(\S+)\s+(pass|fail|crash|timeout)\s+[\d.]+ s", re.M)

CRASHY = '''"""curatedev, plus kernels that kill or hang the process under three of the checks."""
import ctypes
import os
import time

import curatedev  # noqa: F401 - registers the device
import torch

_LIB = torch.library.Library("aten", "IMPL")


def _segfault(*args, **kwargs):
    ctypes.string_at(0)  # reads address 0: SIGSEGV


def _abort(*args, **kwargs):
    os.abort()


def _hang(*args, **kwargs):
    while True:
        time.sleep(1)


def setup():
    _LIB.impl("_to_sparse", _hang, "PrivateUse1")          # the sparse check
    _LIB.impl("_fft_r2c", _segfault, "PrivateUse1")        # the fft check
    _LIB.impl("linalg_inv_ex", _abort, "PrivateUse1")      # the linalg check
'''


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("PYTHONPATH", None)  # the backend is found through --python-path only
    return subprocess.run([str(ENTRY_POINT), "profile", "init", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def _statuses(stderr: str) -> dict[str, str]:
    return {f"{kind}:{name}": status for kind, name, status in PROGRESS.findall(stderr)}


def _curatedev_default_dtypes() -> list[str]:
    """curatedev._policy.DEFAULT_DTYPES, read from the source: importing curatedev here would
    register its device in this process."""
    tree = ast.parse((BACKEND_DIR / "curatedev" / "_policy.py").read_text(encoding="utf-8"))
    value = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                 and any(getattr(t, "id", None) == "DEFAULT_DTYPES" for t in node.targets))
    return list(ast.literal_eval(value))


@pytest.mark.slow
def test_curatedev_profile_lists_what_runs_and_loads(tmp_path: Path) -> None:
    proc = _cli(tmp_path, "--backend-module", "curatedev", "--python-path", str(BACKEND_DIR))
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "backend.yaml"  # the default --out, in the caller's folder
    profile, _ = load_profile(out)
    assert profile.device.kind == "privateuse1" and profile.device.name == "curatedev" and profile.name == "curatedev"
    assert profile.backend_module == "curatedev"
    assert [(out.parent / p).resolve() for p in profile.python_path] == [BACKEND_DIR.resolve()]
    dtypes = [d.name for d in profile.supported_dtypes or []]
    assert sorted(dtypes) == sorted(_curatedev_default_dtypes()) and len(dtypes) == len(set(dtypes))
    assert {"eager_ops", "autograd"} <= set(profile.hooks)
    assert not {"complex", "sparse", "fft", "linalg", "random"} & set(profile.hooks)
    assert profile.preferences == []
    text = out.read_text(encoding="utf-8")
    assert "# float64: not listed: x + x failed: NotImplementedError: \"aten::add.out\" not implemented for 'Double'" in text
    assert "# sparse: not listed: to_sparse failed: NotImplementedError: Could not run 'aten::_to_sparse'" in text
    assert "# Not probed (add them yourself if the backend implements them): inductor, distributed, export, onnx, " \
           "profiler" in text
    assert "Traceback" not in text and "Traceback" not in proc.stderr
    statuses = _statuses(proc.stderr)
    assert len(statuses) == 25 and set(statuses.values()) == {"pass", "fail"}  # a progress line per check
    assert "supported_dtypes: float32, float16, bfloat16, int32, int64, bool" in proc.stdout


@pytest.mark.slow
def test_a_check_that_crashes_or_hangs_is_recorded_and_the_rest_still_run(tmp_path: Path) -> None:
    (tmp_path / "crashy_backend.py").write_text(CRASHY, encoding="utf-8")
    out = tmp_path / "profiles" / "crashy.yaml"
    out.parent.mkdir()  # --out names a file in a folder that exists (no folder is made silently)
    proc = _cli(tmp_path, "--backend-module", "crashy_backend:setup", "--python-path", str(BACKEND_DIR),
                "--python-path", ".", "--out", str(out), "--timeout", "20")  # wide: compile takes seconds under load
    assert proc.returncode == 0, proc.stderr
    statuses = _statuses(proc.stderr)
    assert (statuses["hook:sparse"], statuses["hook:fft"], statuses["hook:linalg"]) == ("timeout", "crash", "crash")
    # the checks after each crash ran in a new process: all 25 have an outcome
    assert len(statuses) == 25 and statuses["hook:compile"] == "pass" and statuses["hook:jit"] == "pass"
    assert "4 worker processes" in proc.stdout
    profile, _ = load_profile(out)
    assert {"eager_ops", "autograd"} <= set(profile.hooks) and not {"sparse", "fft", "linalg"} & set(profile.hooks)
    assert sorted(d.name for d in profile.supported_dtypes or []) == sorted(_curatedev_default_dtypes())
    # Relative to the profile's folder, absolute where the two share no folder but the root.
    # Which of the two BACKEND_DIR gets depends on where the checkout and pytest's tmp folder
    # are (both under /tmp in a fresh clone there), so the check reads the rule, not a spelling.
    here = out.parent
    assert [(here / p).resolve() for p in profile.python_path] == [BACKEND_DIR.resolve(), tmp_path.resolve()]
    assert profile.python_path[1] == ".."
    only_root = Path(os.path.commonpath([BACKEND_DIR, here])) == Path(BACKEND_DIR.anchor)
    assert Path(profile.python_path[0]).is_absolute() is only_root
    text = out.read_text(encoding="utf-8")
    assert "# fft: not listed: crashed the probe process (signal SIGSEGV)" in text
    assert "# linalg: not listed: crashed the probe process (signal SIGABRT)" in text
    assert "# sparse: not listed: no result after 20 s: the probe process was killed" in text


@pytest.mark.slow
def test_openreg_profile(tmp_path: Path) -> None:
    if importlib.util.find_spec("torch_openreg") is None:
        pytest.skip("torch_openreg is not installed (see shared/openreg/README.md to build it)")
    proc = _cli(tmp_path, "--backend-module", "torch_openreg")
    if proc.returncode == 2 and "cannot import backend module 'torch_openreg'" in proc.stderr:
        pytest.skip(f"import torch_openreg fails: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stderr
    profile, _ = load_profile(tmp_path / "backend.yaml")
    assert profile.device.name == "openreg" and profile.python_path == []
    # Every op runs through a CPU fallback: every dtype, and the dense hooks, work.
    assert len(profile.supported_dtypes or []) == 12
    assert {"eager_ops", "autograd", "complex", "fft", "linalg"} <= set(profile.hooks)
    # No sparse, quantized or nested kernels, no autocast module, no device generator in ops.
    assert not {"sparse", "quantized", "nested", "amp", "random"} & set(profile.hooks)
    assert "# random: not listed: rand(generator=) failed: RuntimeError:" in (tmp_path / "backend.yaml").read_text()


def test_an_existing_out_is_never_replaced(tmp_path: Path) -> None:
    out = tmp_path / "backend.yaml"
    out.write_text("# mine\n", encoding="utf-8")
    proc = _cli(tmp_path, "--backend-module", "curatedev", "--python-path", str(BACKEND_DIR))
    assert proc.returncode == 2
    assert f"error: {out} already exists" in proc.stderr and "importing" not in proc.stderr  # nothing probed
    assert out.read_text(encoding="utf-8") == "# mine\n" and sorted(p.name for p in tmp_path.iterdir()) == ["backend.yaml"]


@pytest.mark.parametrize(("module", "message"), [
    ("no_such_backend_module", "error: cannot import backend module 'no_such_backend_module': "
                               "ModuleNotFoundError: No module named 'no_such_backend_module'"),
    ("os.path", "error: backend module 'os.path' imported, but no privateuse1 device is registered"),
], ids=["unknown module", "no device registered"])
def test_a_module_that_is_not_a_backend_is_bad_input(tmp_path: Path, module: str, message: str) -> None:
    proc = _cli(tmp_path, "--backend-module", module)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 2  # progress line, error
    assert not (tmp_path / "backend.yaml").exists()
