"""The durations store and the CI provenance the manifest records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testcurator.errors import BadInputError, MemoryStoreError
from testcurator.runner.shards.durations import DurationStore
from testcurator.runner.provenance import ci_provenance
from testcurator.runner.results.records import TestRecord


def rec(nodeid: str, outcome: str = "passed", duration: float = 1.0, device: str | None = None) -> TestRecord:
    return TestRecord(nodeid=nodeid, outcome=outcome, duration=duration, device=device)


def test_store_keeps_the_latest_real_duration(tmp_path: Path) -> None:
    with DurationStore(tmp_path) as store:
        assert store.known() == {}  # nothing recorded yet, and nothing created
        assert not (tmp_path / "durations.sqlite").exists()
        n = store.record([rec("a.py::t", duration=2.0), rec("a.py::s", "skipped", 0.001), rec("a.py::c", "crashed", 0.0),
                          rec("a.py::f", "failed", 0.5)], "exec")
        assert n == 2 and store.known() == {"a.py::t": 2.0, "a.py::f": 0.5}
        store.record([rec("a.py::t", duration=3.0)], "verify")
        assert store.known()["a.py::t"] == 3.0
        assert {r["nodeid"]: (r["runs"], r["source"]) for r in store.rows()}["a.py::t"] == (2, "verify")


def test_known_for_a_device_prefers_its_own_timings(tmp_path: Path) -> None:
    with DurationStore(tmp_path) as store:
        store.record([rec("a.py::TA::t_cpu", duration=1.0, device="cpu"), rec("b.py::TB::t_cpu", duration=4.0, device="cpu")],
                     "capture")
        store.record([rec("a.py::TA::t_dev", duration=9.0, device="dev")], "exec")
        # a.py has device timings: the CPU ones would skew its median; b.py has none: CPU it is.
        assert store.known_for("dev") == {"a.py::TA::t_dev": 9.0, "b.py::TB::t_cpu": 4.0}
        assert len(store.known_for(None)) == 3


def test_a_corrupt_store_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "durations.sqlite").write_text("not sqlite")
    with pytest.raises(MemoryStoreError, match="not a usable durations store"):
        DurationStore(tmp_path).known()


def test_ci_provenance(tmp_path: Path) -> None:
    assert ci_provenance({}) is None
    payload = tmp_path / "dispatch.json"
    payload.write_text(json.dumps({"event": "repository_dispatch", "torch_sha": "a" * 40}))
    env = {"TESTCURATOR_BACKEND_SHA": "b" * 40, "TESTCURATOR_TORCH_SHA": "a" * 40, "TESTCURATOR_TEST_TREE_SHA": "a" * 40,
           "TESTCURATOR_DISPATCH_PAYLOAD": str(payload), "GITHUB_RUN_ID": "42", "RUNNER_ARCH": "X64"}
    out = ci_provenance(env)
    assert out == {"backend_sha": "b" * 40, "torch_sha": "a" * 40, "test_tree_sha": "a" * 40,
                   "dispatch": {"event": "repository_dispatch", "torch_sha": "a" * 40},
                   "runner": {"run_id": "42", "runner_arch": "X64"}}
    with pytest.raises(BadInputError, match="not a JSON file or JSON text"):
        ci_provenance({"TESTCURATOR_DISPATCH_PAYLOAD": "{nope"})
