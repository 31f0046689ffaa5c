"""Every `testcurator CMD ... --option` the README shows exists in that command's --help (issue 25)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import typer
from typer.testing import CliRunner

from testcurator.cli.main import app

README = Path(__file__).resolve().parents[2] / "README.md"
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"`([^`\n]*testcurator [^`\n]*)`")
OPTION = re.compile(r"^-{1,2}[a-z][a-z0-9-]*$")


def command_lines(text: str) -> list[str]:
    """Each `testcurator ...` command in the README's code blocks and inline code, cut at
    `&&`, `|`, `;` and comments."""
    snippets = [line for block in FENCE.findall(text) for line in block.splitlines()] + INLINE.findall(text)
    out = []
    for snippet in snippets:
        for piece in re.split(r"&&|\|\||[|;]|\s#", snippet):
            found = re.search(r"(?:^|[\s/])testcurator\s+(.*)$", piece)
            if found:
                out.append(found.group(1).strip())
    return out


def split(line: str) -> tuple[tuple[str, ...], list[str]]:
    """(command path, options) of one command line."""
    root = typer.main.get_command(app)
    path: list[str] = []
    tokens = [t.strip("[]") for t in line.split()]
    cmd = root
    for token in tokens:
        subs = getattr(cmd, "commands", None) or {}
        if token not in subs:
            break
        path.append(token)
        cmd = subs[token]
    options = [t.split("=")[0] for t in tokens if t.startswith("-")]
    return tuple(path), [o for o in options if OPTION.match(o)]


@cache
def help_text(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], prog_name="testcurator", terminal_width=400)
    assert result.exit_code == 0, result.output
    return result.output


def test_every_readme_option_exists_in_its_command_help() -> None:
    lines = command_lines(README.read_text(encoding="utf-8"))
    checked, missing = 0, []
    for line in lines:
        path, options = split(line)
        if not path:
            continue
        words = set(re.findall(r"(?<![\w-])-{1,2}[a-z][a-z0-9-]*", help_text(path)))
        for option in options:
            checked += 1
            if option not in words:
                missing.append(f"testcurator {' '.join(path)} {option}  (README: testcurator {line})")
    assert checked >= 40 and len(lines) >= 30, (checked, len(lines))  # the README's commands were read
    assert not missing, "\n".join(missing)


def test_a_wrong_option_is_found() -> None:
    path, options = split("upgrade --old-root A --no-such-option 3")
    assert path == ("upgrade",) and options == ["--old-root", "--no-such-option"]
    assert "--no-such-option" not in help_text(path) and "--old-root" in help_text(path)
    assert command_lines("x `testcurator memory query foo --top 3` y\n```bash\na && testcurator run -n 2  # c\n```\n") \
        == ["run -n 2", "memory query foo --top 3"]
