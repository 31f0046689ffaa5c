"""A shard matrix's durations snapshot: taken once, read unchanged, refreshed on purpose."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testcurator.runner.shards.durations import DurationStore
from testcurator.runner.results.records import TestRecord
from testcurator.runner.shards.snapshot import _create, current_durations, freeze, snapshot_key, snapshot_path
from testcurator.sharding import read_test_durations


def test_the_first_leg_takes_it_and_later_legs_read_it_while_the_store_moves_on(tmp_path: Path) -> None:
    store = DurationStore(tmp_path)
    store.record([TestRecord("t.py::test_a", "passed", duration=1.0)], "exec")
    take = lambda: current_durations(store, None, None)  # noqa: E731
    first = freeze(tmp_path, "k", take)
    assert first.taken and first.path == snapshot_path(tmp_path, "k") == tmp_path / "shard-snapshots" / "k.json"
    store.record([TestRecord("t.py::test_a", "passed", duration=9.0), TestRecord("t.py::test_b", "passed", duration=2.0)],
                 "exec")  # what leg 1 measured
    again = freeze(tmp_path, "k", take)
    assert not again.taken and read_test_durations(again.path) == {"t.py::test_a": 1.0}
    fresh = freeze(tmp_path, "k", take, refresh=True)
    assert fresh.taken and read_test_durations(fresh.path) == {"t.py::test_a": 9.0, "t.py::test_b": 2.0}
    store.close()


def test_two_legs_racing_keep_the_first_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "shard-snapshots" / "k.json"
    assert _create(path, '{"a": 1.0}\n') is True
    assert _create(path, '{"a": 2.0}\n') is False
    assert json.loads(path.read_text()) == {"a": 1.0}
    assert [p.name for p in path.parent.iterdir()] == ["k.json"]  # no temporary file left


def test_the_key_follows_config_content_device_and_durations_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("test_suite_config: {files: []}\n")
    durations = tmp_path / "d.json"
    durations.write_text('{"t.py::test_a": 1.0}')
    base = snapshot_key(config, (), "cpu", None)
    assert base == snapshot_key(config, ("ignored.py",), "cpu", None)  # a group narrows, same matrix durations
    assert len({base, snapshot_key(config, (), "curatedev", None), snapshot_key(config, (), "cpu", durations)}) == 3
    config.write_text("test_suite_config: {files: [], labels: [x]}\n")
    assert snapshot_key(config, (), "cpu", None) != base  # a changed config starts a new snapshot
    (tmp_path / "t.py").write_text("")
    monkeypatch.chdir(tmp_path)  # a draft run: its paths, resolved (a relative one names the same file)
    assert snapshot_key(None, ("t.py",), None, None) == snapshot_key(None, (str(tmp_path / "t.py"),), None, None)
    assert snapshot_key(None, ("t.py::test_a",), None, None) != snapshot_key(None, ("t.py",), None, None)


def test_a_durations_file_wins_over_the_store(tmp_path: Path) -> None:
    store = DurationStore(tmp_path)
    store.record([TestRecord("t.py::test_a", "passed", duration=1.0), TestRecord("t.py::test_b", "passed", duration=1.0)],
                  "exec")
    durations = tmp_path / "d.json"
    durations.write_text('{"t.py::test_a": 5.0, "t.py::test_c": 0}')
    assert current_durations(store, None, durations) == {"t.py::test_a": 5.0, "t.py::test_b": 1.0}
    store.close()
