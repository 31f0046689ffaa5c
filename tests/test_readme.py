"""The README's commands are the ones CI and users run."""

from __future__ import annotations

import re
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# llama-cpp-python (the local-llm extra) built for any x86-64 with AVX2: -march=native emits
# AMX instructions on CPUs that have them, and a server built so dies with SIGSEGV at its first
# request where the kernel or sandbox does not grant AMX (measured on our machines).
PORTABLE = ["-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON", "-DGGML_AVX512=OFF", "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF",
            "-DGGML_AMX_BF16=OFF"]

# python3 that makes a .venv whose pip, python and testcurator write what they were run with,
# one line each: the program, CMAKE_ARGS as it reached it, then its arguments, tab-separated.
FAKE_PYTHON3 = """#!/usr/bin/env bash
[ "$*" = "-m venv .venv" ] || { echo "unexpected: python3 $*" >&2; exit 9; }
mkdir -p .venv/bin
for tool in pip python testcurator; do
  cat > .venv/bin/$tool <<'TOOL'
#!/usr/bin/env bash
{ printf '%s' "$(basename "$0")"; printf '\\t%s' "CMAKE_ARGS=${CMAKE_ARGS-}" "$@"; printf '\\n'; } >> "$CALLS"
TOOL
  chmod +x .venv/bin/$tool
done
"""


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```bash\n(python3 -m venv[^\n]+)\n```", text)


def _test_command() -> str:
    return next(c for c in _readme_commands() if "pytest" in c)


def _main_command() -> str:
    return next(c for c in _readme_commands() if "testcurator run" in c)


def _run_with_fakes(command: str, tmp_path: Path) -> list[list[str]]:
    """Runs ``command`` in bash as a user would paste it, with python3 faked (see above);
    returns the calls it made, in order: [program, "CMAKE_ARGS=...", *arguments]."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(FAKE_PYTHON3)
    (bin_dir / "python3").chmod(stat.S_IRWXU)
    calls = tmp_path / "calls.tsv"
    work = tmp_path / "checkout"
    work.mkdir()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "CALLS": str(calls), "HOME": str(tmp_path)}
    proc = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [line.split("\t") for line in calls.read_text().splitlines()]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    commands = _readme_commands()
    assert len(commands) == 2, commands
    ci_lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("python3 -m venv")]
    assert ci_lines == [_test_command()]


def test_the_test_command_builds_llama_cpp_portably_and_never_from_pip_s_cache(tmp_path: Path) -> None:
    calls = _run_with_fakes(_test_command(), tmp_path)
    assert [c[0] for c in calls] == ["pip", "pip", "python"], calls
    torch, extras, pytest_call = calls
    assert torch[2:] == ["install", "-q", "torch==2.13.0"]
    # The install that builds llama-cpp-python gets the portable flags in its environment and
    # leaves pip's wheel cache alone: a wheel built there earlier with other flags would be reused.
    assert extras[2:] == ["install", "-q", "--no-cache-dir", "-e", ".[test,ray,local-llm]"]
    cmake_args = extras[1].removeprefix("CMAKE_ARGS=").split()
    assert set(PORTABLE) <= set(cmake_args), cmake_args
    assert not any("NATIVE=ON" in a or ("AMX" in a and a.endswith("=ON")) for a in cmake_args), cmake_args
    assert pytest_call[2:] == ["-m", "pytest", "-n", "2", "tests"]


def test_the_local_llm_extra_is_what_the_test_command_builds() -> None:
    """The command's flags are for llama-cpp-python, which only the local-llm extra brings."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    extra = re.search(r"^local-llm = \[(.*)\]$", pyproject, re.M)
    assert extra and "llama-cpp-python" in extra.group(1)
    assert "local-llm" in _test_command() and "local-llm" not in _main_command()


def test_main_command_runs_the_pipeline_on_the_bundled_example(tmp_path: Path) -> None:
    main = _main_command()
    paths = re.findall(r"--(?:torch-root|backend) (\S+)", main)
    assert len(paths) == 2, main
    for path in paths:
        assert (ROOT / path).exists(), path
    calls = _run_with_fakes(main, tmp_path)
    assert [c[0] for c in calls] == ["pip", "pip", "testcurator"], calls
    assert calls[0][2:] == ["install", "-q", "torch==2.13.0"]
    assert calls[1][2:] == ["install", "-q", "-e", ".[test]"]
    assert calls[2][2:4] == ["run", "--torch-root"] and "examples/upstream" in calls[2]
