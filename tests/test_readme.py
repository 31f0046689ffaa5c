"""The README's commands are the ones CI and users run."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```bash\n(python3 -m venv[^\n]+)\n```", text)


def test_ci_runs_exactly_the_readme_test_command() -> None:
    commands = _readme_commands()
    assert len(commands) == 2, commands
    test_command = next(c for c in commands if "pytest" in c)
    ci_lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("python3 -m venv")]
    assert ci_lines == [test_command]


def test_main_command_runs_the_pipeline_on_the_bundled_example() -> None:
    main = next(c for c in _readme_commands() if "testcurator run" in c)
    for path in re.findall(r"--(?:torch-root|backend) (\S+)", main):
        assert (ROOT / path).exists(), path
    assert "torch==2.13.0" in main
