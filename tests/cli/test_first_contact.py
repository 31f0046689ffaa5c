"""First contact (issue 25): bad command lines through the installed entry point.

Every path option set to a missing path, a file where a folder is expected (and the
reverse), an existing output of the wrong kind, a folder that does not exist, a place that
cannot be written; and bad values. Each exits 2 with a few lines, never a traceback, and
leaves nothing behind in the folder it ran in. Run as a user runs it, in a subprocess.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINT = Path(sys.executable).with_name("testcurator")
UPSTREAM = ROOT / "examples" / "upstream"
BACKEND = ROOT / "examples" / "backend" / "backend.yaml"
CONFIG = ROOT / "examples" / "configs" / "example.yaml"
RUN = f"run --torch-root {UPSTREAM} --backend {BACKEND}"

# (command line, a fragment of the message). In the working folder: `afile` (a file),
# `adir` (an empty folder), `conf.yaml` (a valid config); {ro}: a folder nothing can be written in.
BAD = [
    (f"{RUN} --out afile", "afile is a file; name a folder"),
    (f"{RUN} --out o --state-dir afile", "'--state-dir'"),
    (f"{RUN} --out {{ro}}/o", "cannot write in"),
    (f"{RUN} --out o --resume --state-dir st", "nothing to resume"),
    (f"run --torch-root afile --backend {BACKEND} --out o", "afile is a file; a folder is expected"),
    (f"run --torch-root {UPSTREAM} --backend adir --out o", "adir is a folder; a file is expected"),
    ("review conf.yaml conf.yaml --out adir", "adir is a folder; name a file"),
    ("review conf.yaml conf.yaml --out /nonexistent/dir/r.html", "the folder /nonexistent/dir does not exist"),
    ("review conf.yaml conf.yaml --out {ro}/r.md", "cannot write in"),
    ("review conf.yaml conf.yaml --format pdf", "'pdf' is not one of"),
    ("tiers --config conf.yaml --budget-s 10 --out adir", "adir is a folder; name a file"),
    ("durations export --out adir", "adir is a folder; name a file"),
    ("durations import missing.json", "does not exist"),
    ("durations show --top 0", "'--top'"),
    ("export disabled-tests --config conf.yaml --out adir", "adir is a folder; name a file"),
    (f"ci github --backend {BACKEND} --shards 2 --out adir", "adir is a folder; name a file"),
    (f"ci github --backend {BACKEND} --shards 2 --config /tmp --out wf.yml", "--config /tmp: not inside the backend"),
    ("exec --config missing.yaml", "config path does not exist"),
    (f"exec --config conf.yaml --torch-root {UPSTREAM} --out afile", "afile is a file; name a folder"),
    ("eval adir", "is not a run folder"),
    ("report missing", "does not exist"),
    ("memory build --torch-root afile", "afile is a file; a folder is expected"),
    ("ops ingest adir", "adir is a folder; a file is expected"),
    (f"import skiplist adir --torch-root {UPSTREAM} --out o", "adir is a folder; a file is expected"),
    (f"upgrade --old-root missing --new-root {UPSTREAM} --config adir --out o --backend {BACKEND}", "does not exist"),
    ("llm serve --model-dir afile", "afile is a file; name a folder"),
    ("validate conf.yaml --level 4", "'--level'"),
]


def unwritable_folder(base: Path) -> Path:
    """A folder nothing can be created in: a read-only one, or /sys when root ignores the bits."""
    folder = base / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    for candidate in (folder, Path("/sys")):
        try:
            with tempfile.TemporaryFile(dir=candidate):
                pass
        except OSError:
            return candidate
    pytest.skip("no unwritable folder on this machine")


def run(line: str, cwd: Path, ro: Path) -> subprocess.CompletedProcess[str]:
    argv = [a.replace("{ro}", str(ro)) for a in line.split()]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "COLUMNS": "100"}
    return subprocess.run([str(ENTRY_POINT), *argv], cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "afile").write_text("x\n")
    (work / "adir").mkdir()
    (work / "conf.yaml").write_text(CONFIG.read_text(encoding="utf-8"))
    return work


@pytest.mark.parametrize(("line", "what"), BAD, ids=[b[0].replace(str(ROOT), "") for b in BAD])
@pytest.mark.slow
def test_bad_command_line_exits_2_in_a_few_lines(line: str, what: str, workdir: Path, tmp_path: Path) -> None:
    ro = unwritable_folder(tmp_path)
    before = sorted(p.name for p in workdir.iterdir())
    proc = run(line, workdir, ro)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output
    assert "Traceback" not in output and len(output.splitlines()) <= 4, output
    assert what in output, output
    assert sorted(p.name for p in workdir.iterdir()) == before, "left something behind"
    assert not Path("/nonexistent").exists()


def test_the_table_covers_most_commands() -> None:
    commands = {line.split()[0] for line, _ in BAD}
    assert len(BAD) >= 20 and len(commands) >= 14, commands


def test_version_prints_and_exits_0(tmp_path: Path) -> None:
    proc = run("--version", tmp_path, tmp_path)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("testcurator ") and proc.stdout.split()[1][0].isdigit(), proc.stdout


def test_show_completion_prints_a_bash_script(tmp_path: Path) -> None:
    # Typed in bash, as a user does: typer finds the shell among the process's parents, and a
    # pytest started by nohup or cron has none ("Shell  not supported.").
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COLUMNS": "100"}
    proc = subprocess.run(["bash", "-c", f"'{ENTRY_POINT}' --show-completion bash; exit $?"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "_TESTCURATOR_COMPLETE=complete_bash" in proc.stdout and "complete " in proc.stdout
    # and the completion it installs answers: the commands that start with "re"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "_TESTCURATOR_COMPLETE": "complete_bash",
           "COMP_WORDS": "testcurator re", "COMP_CWORD": "1"}
    done = subprocess.run([str(ENTRY_POINT)], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert set(done.stdout.split()) == {"refine", "report", "review"}, done.stdout + done.stderr

