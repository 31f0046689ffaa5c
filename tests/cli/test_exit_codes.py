"""Exit codes CI can gate on, through the installed ``testcurator`` in a subprocess.

0 the curated suite held, 1 it did not, 2 bad input, 3 infrastructure failure; relative
paths are relative to where the user stands, not to the torch root pytest runs in.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ENTRY_POINT = Path(sys.executable).with_name("testcurator")
FAILING_FOUR = "import pytest\n\n@pytest.mark.parametrize('n', range(4))\ndef test_four(n):\n    assert n < 0\n"
CONFIG = """test_suite_config:
  schema_version: 1
  files:
    - path: test/test_four.py
      unlisted_test_mode: skip
      tests:
        - names: [test_four]
          mode: mandatory_success
"""


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "PYTEST_ADDOPTS": "-p no:langsmith_plugin -p no:hypothesispytest -p no:anyio"}
    env.pop("TORCH_ROOT", None)
    return subprocess.run([str(ENTRY_POINT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
                          check=False)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "torch"
    (root / "test").mkdir(parents=True)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    caller = tmp_path / "caller"
    caller.mkdir()
    return root


def _last(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr


# (case, files of the tree, exec arguments after the tree, exit code, text in the output)
CASES = [
    ("held, relative --out", {"test/test_ok.py": "def test_ok():\n    pass\n"}, ["test_ok.py"], 0, "held (1 test(s) ran"),
    ("mandatory failure", {"test/test_four.py": FAILING_FOUR}, ["test_four.py"], 1, "did NOT hold (4 test(s) ran"),
    ("broken pytest.ini", {"test/test_ok.py": "def test_ok():\n    pass\n", "pytest.ini": "[pytest]\naddopts = --bogus\n"},
     ["test_ok.py"], 3, "INFRASTRUCTURE FAILURE"),
    ("nothing collected", {"test/test_none.py": "X = 1\n"}, ["test_none.py"], 3, "no test ran"),
    ("nothing collected, allowed", {"test/test_none.py": "X = 1\n"}, ["test_none.py", "--allow-empty"], 0, "held (0 test(s)"),
]


@pytest.mark.parametrize(("files", "args", "code", "text"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_exec_exit_codes(tmp_path: Path, files: dict[str, str], args: list[str], code: int, text: str) -> None:
    _tree(tmp_path, files)
    target, *more = args
    # Relative everything: the test path, --torch-root and --out, from the caller's folder.
    proc = _cli(tmp_path / "caller", "exec", f"../torch/test/{target}", "--torch-root", "../torch", "--out", "ex", "-q",
                "--retries", "0", *more)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert text in proc.stdout + proc.stderr
    assert (tmp_path / "caller" / "ex" / "results.jsonl").is_file()


def test_curated_exec_with_a_failing_mandatory_test_exits_1(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"test/test_four.py": FAILING_FOUR})
    (tmp_path / "caller" / "configs").mkdir()
    (tmp_path / "caller" / "configs" / "four.yaml").write_text(CONFIG, encoding="utf-8")
    proc = _cli(tmp_path / "caller", "exec", "--config", "configs", "--torch-root", str(root), "--out", "ex", "-q",
                "--retries", "0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "test_four[3]: failed" in proc.stdout
    assert "did NOT hold (4 test(s) ran; exit 1)" in _last(proc)


def test_exec_names_stale_config_entries_on_the_console(tmp_path: Path) -> None:
    """A config naming a test that does not exist: exit 0 with the entry named (issue 22: only
    pytest's log said "1 stale config entries")."""
    root = _tree(tmp_path, {"test/test_ok.py": "def test_ok():\n    pass\n"})
    config = tmp_path / "ok.yaml"
    config.write_text("test_suite_config:\n  files:\n    - path: test/test_ok.py\n      tests:\n"
                      "        - names: [test_ok, test_gone]\n          mode: mandatory_success\n", encoding="utf-8")
    proc = _cli(tmp_path, "exec", "--config", str(config), "--torch-root", str(root), "--out", "ex", "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 stale config entry: named tests the run did not collect" in proc.stdout
    assert "  test/test_ok.py::test_gone" in proc.stdout.splitlines()


PROFILE = "schema_version: 1\nname: typo\ndevice: {{kind: privateuse1, name: typodev}}\nbackend_module: {module}\n"


@pytest.mark.parametrize(("backend", "text"), [
    ("no_such_backend_module", "is neither a backend profile"),
    ("missing.yaml", "backend profile missing.yaml does not exist"),
    ("typo.yaml", "backend module 'no_such_backend_mod' does not import"),
])
def test_exec_backend_that_is_neither_a_profile_nor_a_module_is_bad_input(tmp_path: Path, backend: str, text: str) -> None:
    _tree(tmp_path, {"test/test_ok.py": "def test_ok():\n    pass\n"})
    (tmp_path / "caller" / "typo.yaml").write_text(PROFILE.format(module="no_such_backend_mod"), encoding="utf-8")
    proc = _cli(tmp_path / "caller", "exec", "../torch/test/test_ok.py", "--torch-root", "../torch", "--out", "ex",
                "--backend", backend, "-q")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert text in proc.stderr
    assert not (tmp_path / "caller" / "ex" / "results.jsonl").exists()  # nothing ran


def test_run_with_a_backend_module_typo_is_bad_input_before_anything_runs(tmp_path: Path) -> None:
    _tree(tmp_path, {"test/test_ok.py": "def test_ok():\n    pass\n"})
    (tmp_path / "caller" / "typo.yaml").write_text(PROFILE.format(module="no_such_backend_mod"), encoding="utf-8")
    proc = _cli(tmp_path / "caller", "run", "--torch-root", "../torch", "--backend", "typo.yaml", "--out", "out",
                "--state-dir", "state")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "typo.yaml: backend_module: backend module 'no_such_backend_mod' does not import" in proc.stderr
    assert not (tmp_path / "caller" / "state").exists()  # no memory was built


def test_help_documents_the_exit_codes() -> None:
    for command in ("exec", "run"):
        proc = _cli(Path.cwd(), command, "--help")
        assert "Exit codes: 0" in " ".join(proc.stdout.split()), command
