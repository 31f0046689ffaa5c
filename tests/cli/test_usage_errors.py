"""Usage errors through the installed ``testcurator`` entry point: two lines, exit 2, no traceback.

Run as a user runs it, in a subprocess: the handler must catch the exception classes of the
click that typer really ships (typer >= 0.26 vendors its own), which an in-process call
through a test runner would not prove.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ENTRY_POINT = Path(sys.executable).with_name("testcurator")

# (command line, a fragment of the first line, the usage line's command)
BAD = [
    ("validate", "Missing argument 'PATH...'", "testcurator validate"),
    ("validate --torch-root", "requires an argument", "testcurator validate"),
    ("validate --no-such-flag x.yaml", "No such option: --no-such-flag", "testcurator validate"),
    ("run --timeout -1 --torch-root . --backend b.yaml --out o", "'--timeout'", "testcurator run"),
    ("run --brain gpt --torch-root . --backend b.yaml --out o", "'gpt' is not one of offline, llm", "testcurator run"),
    ("run --torch-root .", "Missing option '--backend'", "testcurator run"),
    ("exec -n two", "'-n' / '--workers'", "testcurator exec"),
    ("exec --timeout soon", "'--timeout'", "testcurator exec"),
    ("exec", "give --config PATH", "testcurator exec"),
    ("exec --bogus", "No such option: --bogus", "testcurator exec"),
    ("bogus", "No such command 'bogus'", "testcurator"),
    ("memory build", "Missing option '--torch-root'", "testcurator memory build"),
    ("memory build --torch-root . -n 0", "'-n' / '--workers'", "testcurator memory build"),
    ("memory query", "Missing argument 'TEXT'", "testcurator memory query"),
    ("memory query x --top 0", "'--top'", "testcurator memory query"),
    ("memory show x --format yaml", "'yaml' is not one of text, json", "testcurator memory show"),
    ("memory nope", "No such command 'nope'", "testcurator memory"),
    ("ops tests-for", "Missing argument 'OP'", "testcurator ops tests-for"),
    ("review only-one", "Missing argument 'NEW'", "testcurator review"),
    ("review a b --format pdf", "'pdf' is not one of terminal, markdown, html, json", "testcurator review"),
    ("review a b --out x -o y", "give --out only", "testcurator review"),
    ("refine", "give --results FILE", "testcurator refine"),
    ("upgrade --old-root .", "Missing option '--new-root'", "testcurator upgrade"),
    ("enable-op", "Missing argument 'OP'", "testcurator enable-op"),
    ("enable-op add --timeout -5 --config c", "'--timeout'", "testcurator enable-op"),
    ("import skiplist f.py --torch-root . --out o --mode mandatory_success", "is not one of skip, xfail, xfail_strict",
     "testcurator import skiplist"),
    ("export disabled-tests --out x.json", "Missing option '--config'", "testcurator export disabled-tests"),
    ("schema extra", "unexpected extra argument", "testcurator schema"),
]


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    assert ENTRY_POINT.is_file(), f"the console script is not installed beside {sys.executable}: pip install -e ."
    base = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "COLUMNS": "80"}
    if os.environ.get("PYTHONPATH"):  # lets the same table run against another typer release
        base["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.run([str(ENTRY_POINT), *argv], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**base, **(env or {})})


@pytest.mark.parametrize(("line", "what", "usage"), BAD, ids=[b[0] for b in BAD])
@pytest.mark.slow
def test_bad_command_line_exits_2_with_two_lines(line: str, what: str, usage: str, tmp_path: Path) -> None:
    proc = run(line.split(), tmp_path)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert len(lines) == 2, proc.stderr
    assert lines[0].startswith("error: ") and what in lines[0], proc.stderr
    assert lines[1].startswith(f"usage: {usage} [OPTIONS]"), proc.stderr


def test_at_least_fifteen_bad_lines() -> None:
    assert len(BAD) >= 15 and len({b[2] for b in BAD}) >= 12  # most commands, not one command many times


def test_bare_group_prints_its_help_and_exits_2(tmp_path: Path) -> None:
    proc = run(["ops"], tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stdout.startswith("Usage: testcurator ops [OPTIONS] COMMAND [ARGS]...") and "tests-for" in proc.stdout


def test_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    # Not a usage error but bad input: one "error:" line (no usage line), still exit 2.
    proc = run(["review", str(tmp_path / "missing-a"), str(tmp_path / "missing-b")], tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [f"error: config path does not exist: {tmp_path / 'missing-a'}"]


def test_help_works_and_exits_0(tmp_path: Path) -> None:
    proc = run(["exec", "--help"], tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("Usage: testcurator exec [OPTIONS] [TEST]...")
