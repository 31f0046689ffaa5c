"""`testcurator run` on a tree whose own pytest harness breaks pytest: exit 2 at once, two lines.

Through the installed command in a subprocess, as a user meets it: the error names the file
and line that broke, says where pytest's whole output is, and nothing else was started.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ENTRY_POINT = Path(sys.executable).with_name("testcurator")
# A backend module that imports anywhere (the harness is what this is about).
PROFILE = "schema_version: 1\nname: h\ndevice: {kind: privateuse1, name: harnessdev}\nbackend_module: json\n"


@pytest.mark.parametrize(("files", "where"), [
    ({"test/conftest.py": "import os\n\nraise RuntimeError('boom at import')\n"}, "test/conftest.py:3: RuntimeError"),
    ({"pytest.ini": "[pytest]\naddopts =\n    --tb=native\n    --no-such-flag\n"}, "pytest.ini:4: unrecognized"),
], ids=["conftest raises", "ini addopts"])
def test_run_on_a_broken_harness_is_bad_input_in_two_lines(tmp_path: Path, files: dict[str, str], where: str) -> None:
    tree, caller = tmp_path / "torch", tmp_path / "caller"
    (tree / "test").mkdir(parents=True)
    caller.mkdir()
    (tree / "test" / "test_ok.py").write_text("def test_ok():\n    pass\n", encoding="utf-8")
    for name, text in files.items():
        (tree / name).write_text(text, encoding="utf-8")
    (caller / "h.yaml").write_text(PROFILE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "TORCH_ROOT"}
    proc = subprocess.run([str(ENTRY_POINT), "run", "--torch-root", "../torch", "--backend", "h.yaml", "--out", "out",
                           "--state-dir", "state"], cwd=caller, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2 and where in lines[0] and "INTERNALERROR" not in proc.stderr
    log = caller / "state" / "preflight" / "harness.log"
    assert str(log) in lines[1] and log.is_file()
    assert not (caller / "out").exists() and not (caller / "state" / "runs").exists()  # nothing else ran
