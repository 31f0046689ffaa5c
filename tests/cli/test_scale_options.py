"""The scale, eval and llm commands take their options from the registry: bounds and choices
are usage errors, ``--json``/``-o`` are deprecated spellings, ``--durations`` means one thing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testcurator.cli.main import main
from testcurator.cli.options import EVAL_SOURCE

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = ROOT / "examples" / "upstream"
CONFIGS = ROOT / "examples" / "configs"


def test_eval_sources_are_the_pipelines_sources() -> None:
    from testcurator.pipelines.evaluate import SOURCES

    assert EVAL_SOURCE.choices == tuple(SOURCES)


@pytest.mark.parametrize(("argv", "wanted"), [
    (["eval", "latest", "--source", "stored", "--source", "oracle"], "'oracle' is not one of stored, offline, llm"),
    (["llm", "serve", "--port", "70000"], "'--port'"),
    (["llm", "serve", "--context-tokens", "100"], "'--context-tokens'"),
    (["shards", "plan", "--max-job-s", "0", "--config", "c"], "'--max-job-s'"),
    (["tiers", "--budget-s", "-1", "--config", "c"], "'--budget-s'"),
    (["ci", "github", "--shards", "0", "--backend", "b.yaml"], "'--shards'"),
    (["shards", "plan", "--config", str(CONFIGS), "--json", "--format", "json"], "give --format json only"),
])
def test_bad_values_are_usage_errors(argv: list[str], wanted: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert wanted in err and f"usage: testcurator {' '.join(argv[:2] if argv[0] in ('llm', 'shards', 'ci') else argv[:1])}" in err
    assert "Traceback" not in err


def _plan(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, int]:
    """Shards per feature group."""
    assert main(["shards", "plan", "--config", str(CONFIGS), "--torch-root", str(UPSTREAM), *args]) == 0
    return {job["group"]: int(job["shard"].split("/")[1]) for job in json.loads(capsys.readouterr().out)["include"]}


def test_shards_plan_json_is_deprecated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = str(tmp_path / "state")
    new = _plan(capsys, "--state-dir", state, "--format", "json")
    assert main(["shards", "plan", "--config", str(CONFIGS), "--torch-root", str(UPSTREAM), "--state-dir", state, "--json"]) == 0
    out, err = capsys.readouterr()
    assert "warning: --json is deprecated; use --format json" in err
    assert {j["group"]: int(j["shard"].split("/")[1]) for j in json.loads(out)["include"]} == new


def test_shards_plan_durations_file_is_merged_over_the_state_dirs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # As for exec, --durations adds to the state dir's timings (the file wins where both know a test).
    state = str(tmp_path / "state")
    stored, extra = tmp_path / "stored.json", tmp_path / "extra.json"
    stored.write_text(json.dumps({"test/test_ops.py::TestA::test_a": 250.0, "test/test_view_ops.py::TestV::test_v": 90.0}))
    extra.write_text(json.dumps({"test/test_view_ops.py::TestV::test_v": 10.0}))
    assert main(["durations", "import", str(stored), "--state-dir", state]) == 0
    capsys.readouterr()
    plan = _plan(capsys, "--state-dir", state, "--durations", str(extra), "--max-job-s", "100", "--format", "json")
    # eager: test_ops.py 250 s (store) + test_view_ops.py 10 s (file) + test_nn_modules.py unmeasured, the median
    # 130 s: 4 jobs of <= 100 s (the file alone would give 3 x 10 s: 1 job).
    assert plan["eager"] == 4
    assert _plan(capsys, "--state-dir", state, "--max-job-s", "100", "--format", "json")["eager"] == 6  # 250 + 90 + 170


def test_shards_plan_freezes_the_snapshot_exec_legs_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = str(tmp_path / "state")
    stored = tmp_path / "stored.json"
    stored.write_text(json.dumps({"test/test_ops.py::TestA::test_a": 250.0}))
    assert main(["durations", "import", str(stored), "--state-dir", state]) == 0
    capsys.readouterr()
    first = _plan(capsys, "--state-dir", state, "--max-job-s", "100", "--format", "json")
    snapshots = list((tmp_path / "state" / "shard-snapshots").glob("*.json"))
    assert len(snapshots) == 1 and json.loads(snapshots[0].read_text()) == {"test/test_ops.py::TestA::test_a": 250.0}
    stored.write_text(json.dumps({"test/test_ops.py::TestA::test_a": 1000.0}))  # legs ran and recorded since
    assert main(["durations", "import", str(stored), "--state-dir", state]) == 0
    capsys.readouterr()
    assert _plan(capsys, "--state-dir", state, "--max-job-s", "100", "--format", "json") == first  # the same snapshot
    refreshed = _plan(capsys, "--state-dir", state, "--max-job-s", "100", "--format", "json", "--refresh-snapshot")
    assert refreshed["eager"] > first["eager"]
    assert json.loads(snapshots[0].read_text()) == {"test/test_ops.py::TestA::test_a": 1000.0}


def test_durations_export_old_short_flag_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = str(tmp_path / "state")
    source = tmp_path / "d.json"
    source.write_text(json.dumps({"test/test_a.py::test_one": 1.5}))
    assert main(["durations", "import", str(source), "--state-dir", state]) == 0
    out = tmp_path / "exported.json"
    assert main(["durations", "export", "--state-dir", state, "-o", str(out)]) == 0
    assert "warning: -o/--output is deprecated; use --out" in capsys.readouterr().err
    assert json.loads(out.read_text()) == {"test/test_a.py::test_one": 1.5}
