"""Sharded runs through the installed `testcurator`: same results as one run, lossless merges."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testcurator.errors import ExecutionError
from testcurator.vocab import FAILING
from testcurator.runner.shards.executors import Job, LocalExecutor, ShardFailedError
from testcurator.runner.shards.registry import make_executor

TC = str(Path(sys.executable).with_name("testcurator"))
# The module's runs are made once, on one worker (--dist loadfile, pyproject.toml).

FILE_A = """
import time

def test_slow():
    time.sleep(0.4)

def test_skipped_by_config():
    raise AssertionError("the config skips me")

{tests}
"""

CONFIG = """
test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test_a.py
      unlisted_test_mode: mandatory_success
      tests:
        - names: [test_skipped_by_config]
          mode: skip
    - path: ${TORCH_ROOT}/test_b.py
      unlisted_test_mode: mandatory_success
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    plain = "\n".join(f"def test_a{i}():\n    assert {i} >= 0\n" for i in range(10))
    (root / "test_a.py").write_text(FILE_A.format(tests=plain))
    (root / "test_b.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.parametrize("n", range(6))
        def test_b(n):
            assert n % 3, "every third fails"
    """))
    (root / "config.yaml").write_text(CONFIG)
    return root


def tc(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200")
    proc = subprocess.run([TC, *args], cwd=cwd, capture_output=True, text=True, timeout=600, env=env)
    if check:
        assert proc.returncode == _expected_code(args, cwd), proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def _expected_code(args: tuple[str, ...], cwd: Path) -> int:
    """exec exits 1 when a mandatory test failed (test_b's every third), else 0."""
    if args[0] != "exec":
        return 0
    out = cwd / args[args.index("--out") + 1]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return 1 if any(r["outcome"] in FAILING for r in rows) else 0


def outcomes(folder: Path) -> dict[str, str]:
    lines = (folder / "results.jsonl").read_text().splitlines()
    return {json.loads(line)["nodeid"]: json.loads(line)["outcome"] for line in lines}


def exec_args(tree: Path, out: str, *more: str) -> list[str]:
    return ["exec", "--config", str(tree / "config.yaml"), "--torch-root", str(tree), "--out", out, "-q",
            "--retries", "0", "--state-dir", "state-" + out, *more]


@pytest.fixture(scope="module")
def runs(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("runs")
    tc(*exec_args(tree, "whole"), cwd=work)
    tc(*exec_args(tree, "sharded", "--shards", "3"), cwd=work)
    return work


@pytest.mark.slow
def test_three_shards_give_the_results_of_one_run(runs: Path) -> None:
    whole, sharded = outcomes(runs / "whole"), outcomes(runs / "sharded")
    assert len(whole) == 18 and whole == sharded
    assert whole["test_a.py::test_skipped_by_config"] == "skipped"
    parts = [outcomes(runs / "sharded" / "shards" / f"{k}-of-3") for k in (1, 2, 3)]
    assert sum(map(len, parts)) == 18 and set().union(*parts) == set(whole)  # disjoint, complete
    assert all(any(o != "skipped" for o in p.values()) for p in parts)  # none empty
    manifest = json.loads((runs / "sharded" / "manifest.json").read_text())
    assert [s["options"]["shard"] for s in manifest["shards"]] == ["1/3", "2/3", "3/3"]
    assert manifest["counts"]["failed"] == 2 and len(manifest["tests"]) == 18
    junit = (runs / "sharded" / "junit.xml").read_text()
    assert junit.count("<testcase ") == 18


def test_refine_merges_shard_folders_losslessly(runs: Path) -> None:
    shards = [str(runs / "sharded" / "shards" / f"{k}-of-3") for k in (1, 2, 3)]
    tc("refine", "--results", *shards, "--out", "merged", cwd=runs)
    merged = [json.loads(line) for line in (runs / "merged" / "results.jsonl").read_text().splitlines()]
    direct = [json.loads(line) for line in (runs / "sharded" / "results.jsonl").read_text().splitlines()]
    key = lambda r: r["nodeid"]  # noqa: E731
    # Every field survives (durations, identity, evidence), apart from where it was read from.
    assert [dict(r, source=None) for r in sorted(merged, key=key)] == [dict(r, source=None) for r in sorted(direct, key=key)]
    manifest = json.loads((runs / "merged" / "manifest.json").read_text())
    assert len(manifest["shards"]) == 3 and len(manifest["tests"]) == 18
    # A run folder counts once: not again through its junit.xml, work/ logs or shard folders.
    tc("refine", "--results", str(runs / "sharded"), "--out", "again", cwd=runs)
    assert len((runs / "again" / "results.jsonl").read_text().splitlines()) == 18


@pytest.mark.slow
def test_one_shard_by_itself_is_the_same_shard(tree: Path, runs: Path) -> None:
    durations = runs / "fixed.json"
    known = dict.fromkeys(outcomes(runs / "whole"), 0.01)
    durations.write_text(json.dumps(known | {"test_a.py::test_slow": 5.0}))
    ids = []
    for k in (1, 2, 3):
        tc(*exec_args(tree, f"leg{k}", "--shard", f"{k}/3", "--durations", str(durations)), cwd=runs)
        ids.append(set(outcomes(runs / f"leg{k}")))
        again = tc(*exec_args(tree, f"leg{k}b", "--shard", f"{k}/3", "--durations", str(durations)), cwd=runs)
        assert set(outcomes(runs / f"leg{k}b")) == ids[-1], again.stdout  # same inputs, same shard
    assert sorted(n for s in ids for n in s) == sorted(outcomes(runs / "whole"))
    # The slow test weighs 5 s: its shard holds nothing else that runs.
    slow = next(s for s in ids if "test_a.py::test_slow" in s)
    assert slow - {"test_a.py::test_slow"} <= {"test_a.py::test_skipped_by_config"}


def test_durations_are_recorded_and_exported(runs: Path) -> None:
    tc("durations", "export", "--state-dir", "state-whole", "--out", "d.json", cwd=runs)
    exported = json.loads((runs / "d.json").read_text())
    assert "test_a.py::test_skipped_by_config" not in exported  # a skip's time says nothing
    assert exported["test_a.py::test_slow"] >= 0.4
    assert len(exported) == 17 and all(v > 0 for v in exported.values())
    tc("durations", "import", "d.json", str(runs / "sharded"), "--state-dir", "imported", cwd=runs)
    shown = tc("durations", "show", "--state-dir", "imported", "--top", "1", cwd=runs).stdout
    assert "test_a.py::test_slow" in shown and "import 17" in shown


def test_bad_shard_values_are_usage_errors(tree: Path, runs: Path) -> None:
    for args, message in ((["--shard", "4/3"], "1 <= K <= N"), (["--shard", "1/2", "--shards", "2"], "give one of them"),
                          (["--group", "inductor"], "no file of"), (["--executor", "dask"], "'dask' is not one of local, ray")):
        proc = tc(*exec_args(tree, "bad", *args), cwd=runs, check=False)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr


@pytest.mark.slow
def test_a_shard_that_fails_twice_is_an_infrastructure_failure(tree: Path, tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text("def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    # pytest dies after collection, before any test: the runner cannot make progress.
    (tmp_path / "conftest.py").write_text("import os\n\ndef pytest_runtestloop(session):\n    os._exit(9)\n")
    proc = tc("exec", "--out", "out", "-q", "--shards", "2", "--state-dir", "st", str(tmp_path / "test_x.py"),
              cwd=tmp_path, check=False)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "failed 2 times (infrastructure failure, not a test failure)" in proc.stderr


def test_local_executor_retries_once() -> None:
    calls: list[int] = []

    def flaky(n: int) -> int:
        calls.append(n)
        if calls.count(n) == 1:
            raise ExecutionError("worker lost")
        return n * 10

    assert LocalExecutor().run([Job("a", flaky, 1), Job("b", flaky, 2)]) == [10, 20]

    def broken(n: int) -> int:
        raise ExecutionError(f"no device {n}")

    with pytest.raises(ShardFailedError, match="shard 7: no device 7") as info:
        make_executor("local").run([Job("shard 7", broken, 7)])
    assert info.value.exit_code == 3


@pytest.mark.slow
def test_a_run_starts_the_file_with_the_slowest_known_test_first(tree: Path, runs: Path) -> None:
    # The config lists test_b.py (quick tests) first; the state of "whole" knows test_a.py's
    # 0.4 s test_slow, so the run starts with test_a.py. Without durations: the config's order.
    (tree / "quick_first.yaml").write_text(CONFIG.replace("test_a.py", "test_x.py").replace("test_b.py", "test_a.py")
                                           .replace("test_x.py", "test_b.py"))
    first = {}
    for out, state in (("ordered", "state-whole"), ("unordered", "state-fresh")):
        args = exec_args(tree, out)
        args[args.index("--config") + 1] = str(tree / "quick_first.yaml")
        args[args.index("--state-dir") + 1] = state
        tc(*args, cwd=runs)
        lines = (runs / out / "work" / "run-0.args").read_text().splitlines()
        first[out] = [Path(line).name for line in lines]
    assert first == {"ordered": ["test_a.py", "test_b.py"], "unordered": ["test_b.py", "test_a.py"]}
