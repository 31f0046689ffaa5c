"""Night after night on the example backend (curatedev, its real allowlist variable): a night
that loses a kernel is red and names the regression without touching the configs; a person
accepts; the kernel comes back and the night names the fix; a night with nothing changed
reads as one line; a test that fails one night in three is flaky, not a regression, and
keeps its mode; `history` shows every run.

One chain of runs on a small tree in PyTorch's style (module-scoped fixtures, in order),
without the CPU capture and the probe: execution is what these checks are about.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from testcurator.cli.main import main

REPO = Path(__file__).resolve().parents[3]
EXAMPLE_BACKEND = REPO / "examples" / "backend"

NIGHTS_FILE = '''\
import os

import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase, run_tests


class TestNights(TestCase):
    @dtypes(torch.float32)
    def test_add(self, device, dtype):
        x = torch.ones(3, device=device, dtype=dtype)
        self.assertEqual((x + x).cpu(), torch.full((3,), 2.0))

    @dtypes(torch.float32)
    def test_tanh(self, device, dtype):
        x = torch.zeros(3, device=device, dtype=dtype)
        self.assertEqual(torch.tanh(x).cpu(), torch.zeros(3))

    def test_lab_board(self, device):
        # Fails while the toggle file exists: an outside cause that no input of the run records.
        if os.path.exists(os.environ.get("NIGHTS_TOGGLE", "/nonexistent")):
            self.fail("the lab board dropped the link")
        self.assertEqual(torch.ones(2, device=device).sum().item(), 2)


instantiate_device_type_tests(TestNights, globals())

if __name__ == "__main__":
    run_tests()
'''
TANH = "test/test_nights.py::TestNights::test_tanh"
BOARD = "test/test_nights.py::TestNights::test_lab_board"


def _allowlist(without: tuple[str, ...] = ()) -> str:
    import sys

    sys.path.insert(0, str(EXAMPLE_BACKEND))
    try:
        from curatedev._policy import DEFAULT_OPS
    finally:
        sys.path.remove(str(EXAMPLE_BACKEND))
    return ",".join(op for op in DEFAULT_OPS if op not in without)


@dataclass
class Chain:
    root: Path
    tree: Path
    out: Path
    state: Path
    toggle: Path
    first: dict[str, bytes] | None = None  # the configs night 1 wrote

    def night(self, capsys: pytest.CaptureFixture[str], *extra: str, allow: str | None = None) -> tuple[int, str]:
        env = {"NIGHTS_TOGGLE": str(self.toggle), "CURATEDEV_ALLOWED_OPS": allow or _allowlist()}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            code = main(["run", "--torch-root", str(self.tree), "--backend", str(EXAMPLE_BACKEND / "backend.yaml"),
                         "--out", str(self.out), "--state-dir", str(self.state), "--no-embed", "--no-capture-ops",
                         "--no-probe", "--retries", "0", "--reuse-within", "0", *extra])
        finally:
            for k, v in saved.items():
                os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
        return code, capsys.readouterr().out

    def configs(self) -> dict[str, bytes]:
        root = self.out / "configs"
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.yaml"))}

    def report(self) -> dict[str, Any]:
        return json.loads((self.out / "report.json").read_text(encoding="utf-8"))

    def mode(self, test: str) -> str:
        from testcurator.config.loader import load_config

        loaded = load_config(self.out / "configs", torch_root=self.tree)
        name = test.split("::", 1)[1]
        return next(e.mode for f in loaded.files for e in f.entries if name in e.names)


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Chain:
    root = tmp_path_factory.mktemp("nights")
    tree = root / "upstream"
    (tree / "test").mkdir(parents=True)
    (tree / "test" / "test_nights.py").write_text(NIGHTS_FILE, encoding="utf-8")
    shutil.copy(REPO / "examples" / "upstream" / "pytest.ini", tree / "pytest.ini")
    return Chain(root, tree, root / "out", root / "state", root / "toggle")


@pytest.mark.slow
def test_night_1_curates_and_holds(chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = chain.night(capsys)
    assert code == 0, out
    chain.first = chain.configs()
    assert chain.mode(TANH) == "mandatory_success"
    assert chain.report()["since"]["previous"] is None
    assert "the standing configs" not in out  # nothing stood before the first night


@pytest.mark.slow
def test_night_2_without_tanh_is_red_names_the_regression_and_keeps_the_configs(chain: Chain,
                                                                                capsys: pytest.CaptureFixture[str]) -> None:
    before = chain.configs()
    code, out = chain.night(capsys, allow=_allowlist(without=("tanh",)))
    assert code == 1, out
    assert chain.configs() == before  # the standing contract is not edited to fit the failure
    lines = out.splitlines()
    regression = next(line for line in lines if line.startswith("REGRESSION: "))
    assert TANH in regression and "aten::tanh" in regression and "cause: backend changed" in regression
    assert "last passed in run nightly-" in regression
    assert lines[-1].startswith("the standing configs did NOT hold tonight")
    assert not any("the curated suite held" in line for line in lines)  # never green by accident
    # Its standing entry still says it passes: a contradiction, named as the entry kept back for review.
    reasons = next(line for line in lines if line.startswith("reasons: "))
    assert "1 of them standing entries of regressed or flaky tests kept back for review" in reasons, reasons
    since = chain.report()["since"]
    assert [f["test"] for f in since["regressions"]] == [TANH]
    assert since["identity"].keys() == {"backend"}
    markdown = (chain.out / "report.md").read_text(encoding="utf-8")
    assert markdown.index("Regressions (1)") < markdown.index("## This run")  # named first
    pending = chain.report()["emit"]["pending"]
    assert [(p["test"], p["standing_mode"]) for p in pending] == [("TestNights::test_tanh", "mandatory_success")]


def test_accepting_writes_the_demotion_with_its_reason(chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["accept", "--out", str(chain.out), "--state-dir", str(chain.state), TANH]) == 0
    assert chain.mode(TANH) == "xfail_strict"
    text = (chain.out / "configs" / "test" / "test_nights.yaml").read_text(encoding="utf-8")
    words = " ".join(text.replace("#", " ").split())  # the reason comment wraps
    assert "aten::tanh" in words and "Accepted by a person from run nightly-" in words
    capsys.readouterr()


@pytest.mark.slow
def test_night_3_with_tanh_back_names_the_fix_and_promotes(chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = chain.night(capsys)
    assert code == 0, out
    since = chain.report()["since"]
    assert TANH in {f["test"] for f in since["fixes"]}
    assert all("backend changed" in f["cause"] for f in since["fixes"])
    assert chain.mode(TANH) == "mandatory_success"  # a fix flows: the strict xfail passed, it is promoted


@pytest.mark.slow
def test_night_4_with_nothing_changed_says_so_in_one_line(chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    before = chain.configs()
    code, out = chain.night(capsys)
    assert code == 0, out
    assert chain.configs() == before  # an empty config diff
    # Nothing the draft depends on changed: its results are the last run's; the judge ran tonight.
    assert "execute: nothing changed since run nightly-" in out and "judge: passed 3" in out
    since = chain.report()["since"]
    assert since["no_change"] is True
    section = (chain.out / "report.md").read_text(encoding="utf-8").split("## Since the previous run", 1)[1]
    section = section.split("## ", 1)[0].strip().splitlines()
    assert len(section) == 1 and section[0].startswith("- Nothing changed since run nightly-")


@pytest.mark.slow
def test_a_test_failing_one_night_of_three_is_flaky_and_keeps_its_mode(chain: Chain,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    before = chain.configs()
    chain.toggle.write_text("on\n")
    try:
        code, out = chain.night(capsys)
    finally:
        chain.toggle.unlink()
    assert code == 1, out  # the standing configs did not hold tonight: never green
    since = chain.report()["since"]
    assert [f["test"] for f in since["flaky_failures"]] == [BOARD] and not since["regressions"]
    assert "cause: nothing changed" in next(line for line in out.splitlines() if line.startswith("FLAKY: "))
    assert chain.configs() == before  # one night does not flip its mode
    code, out = chain.night(capsys)
    assert code == 0, out
    flaky = {f["test"]: f for f in chain.report()["since"]["flaky"]}
    assert flaky[BOARD]["timeline"].endswith("P F P") and flaky[BOARD]["flips"] == 2
    assert chain.mode(BOARD) == "mandatory_success"


def test_history_shows_every_run_per_file_and_per_test(chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "--out", str(chain.out), "--state-dir", str(chain.state), "--format", "json",
                 "--file", "test/test_nights.py", "--test", TANH]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["exit_code"] for r in data["runs"]] == [0, 1, 0, 0, 1, 0]
    assert data["runs"][1]["file"]["failing"] == 1 and data["runs"][0]["file"]["failing"] == 0
    assert data["test"]["timeline"] == "P F P P P P"
    assert "aten::tanh" in data["test"]["last_failure"]["evidence"]
    assert main(["history", "--out", str(chain.out), "--state-dir", str(chain.state)]) == 0
    assert len([line for line in capsys.readouterr().out.splitlines() if " nightly-" in line]) == 6
    page = (chain.out / "history.html").read_text(encoding="utf-8")
    assert page.count("<title>nightly-") == 12  # a bar per run, in the total and in the one file's chart
    assert "history.html" in (chain.out / "report.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_two_runs_started_together_one_refuses_naming_the_other(chain: Chain, tmp_path: Path) -> None:
    import subprocess
    import sys

    tree = tmp_path / "upstream"
    shutil.copytree(chain.tree, tree)
    args = [sys.executable, "-m", "testcurator.cli", "run", "--torch-root", str(tree), "--backend",
            str(EXAMPLE_BACKEND / "backend.yaml"), "--out", str(tmp_path / "out"), "--state-dir", str(tmp_path / "state"),
            "--no-embed", "--no-capture-ops", "--no-probe", "--retries", "0"]
    env = {**os.environ, "CURATEDEV_ALLOWED_OPS": _allowlist(), "NIGHTS_TOGGLE": str(chain.toggle)}
    procs = [subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(2)]
    results = sorted((p.wait(timeout=600), p.stdout.read() if p.stdout else "") for p in procs)
    (won, won_out), (lost, lost_out) = results
    assert (won, lost) == (0, 3), won_out + lost_out
    assert "another testcurator run holds" in lost_out and "pid " in lost_out and "testcurator run --torch-root" in lost_out
    out = tmp_path / "out" / "configs"
    assert {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*.yaml"))} == chain.first
    assert len(list((tmp_path / "state" / "runs").glob("nightly-*"))) == 1  # the refused run left nothing
