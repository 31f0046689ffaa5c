"""--executor ray on a local cluster (a head and two worker nodes with one curatedev each):
the same results and configs as the local executor, byte for byte, even when a worker dies."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import needs
import pytest
from ray_cluster import cluster_env, ray_cluster, task_processes

from testcurator.vocab import FAILING

ROOT = Path(__file__).resolve().parents[3]
EX = ROOT / "examples"
TC = str(Path(sys.executable).with_name("testcurator"))
# One cluster per module: --dist loadfile (pyproject.toml) keeps its tests on one xdist worker.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    needs.module("ray", hint="the ray extra: pip install -e '.[ray]'")
    with ray_cluster(tmp_path_factory.mktemp("ray-logs")) as addr:
        yield addr


def exec_cmd(out: Path, *more: str, profile: Path = EX / "backend" / "backend.yaml") -> list[str]:
    return [TC, "exec", "--config", str(EX / "configs" / "example.yaml"), "--torch-root", str(EX / "upstream"),
            "--backend", str(profile), "--out", str(out), "-q", "--state-dir", str(out) + "-state", *more,
            str(EX / "upstream" / "test" / "test_view_ops.py")]


def run(cmd: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=dict(cluster_env(), **env))


def outcomes(folder: Path) -> dict[str, str]:
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    return {r["nodeid"]: r["outcome"] for r in rows}


def held_code(folder: Path) -> int:
    """exec's exit code: 1 when a mandatory test failed (the example config has such), else 0."""
    return 1 if any(o in FAILING for o in outcomes(folder).values()) else 0


def refined_config(results: Path, work: Path) -> bytes:
    config = work / f"{results.name}.yaml"
    shutil.copyfile(EX / "configs" / "example.yaml", config)
    proc = run([TC, "refine", "--results", str(results), "--config", str(config), "--torch-root", str(EX / "upstream"),
                "--out", str(work / f"{results.name}-refine")])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return config.read_bytes()


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("local") / "local"
    proc = run(exec_cmd(out))
    assert proc.returncode == held_code(out), proc.stderr[-3000:]
    return out


@pytest.mark.slow
def test_ray_gives_the_local_results_and_configs_byte_for_byte(address: str, local: Path, tmp_path: Path) -> None:
    out = tmp_path / "ray"
    proc = run(exec_cmd(out, "--executor", "ray", "--shards", "2"), RAY_ADDRESS=address)
    assert proc.returncode == held_code(out), proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "shard 1/2: done" in proc.stdout and "shard 2/2: done" in proc.stdout
    assert outcomes(out) == outcomes(local) and len(outcomes(local)) > 50
    assert refined_config(out, tmp_path) == refined_config(local, tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(s["options"]["shard"] for s in manifest["shards"]) == ["1/2", "2/2"]


def _kill_a_running_shard(proc: subprocess.Popen[str], deadline_s: float = 600) -> int:
    """SIGKILL the Ray worker running shard 1/2 once its pytest is under way."""
    deadline = time.time() + deadline_s
    while time.time() < deadline and proc.poll() is None:
        for pid in task_processes("shard 1/2"):
            children = Path(f"/proc/{pid}/task/{pid}/children")
            if children.exists() and children.read_text().split():
                time.sleep(3)  # let pytest collect and start running tests
                os.kill(pid, signal.SIGKILL)
                return pid
        time.sleep(0.5)
    raise AssertionError("shard 1/2 never ran on a worker")


@pytest.mark.slow
def test_a_killed_worker_changes_nothing(address: str, local: Path, tmp_path: Path) -> None:
    out = tmp_path / "killed"
    env = dict(cluster_env(), RAY_ADDRESS=address)
    with subprocess.Popen(exec_cmd(out, "--executor", "ray", "--shards", "2"), env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        killed = _kill_a_running_shard(proc)
        stdout, stderr = proc.communicate(timeout=900)
    assert proc.returncode == held_code(out), stdout[-2000:] + stderr[-3000:]
    assert killed and not Path(f"/proc/{killed}").exists()
    assert outcomes(out) == outcomes(local)
    assert refined_config(out, tmp_path) == refined_config(local, tmp_path)


def test_no_node_with_the_device_is_an_infrastructure_error(address: str, tmp_path: Path) -> None:
    profile = tmp_path / "backend.yaml"
    text = (EX / "backend" / "backend.yaml").read_text().replace("resources: {curatedev: 1}", "resources: {otherdev: 1}")
    profile.write_text(text.replace("python_path: [.]", f"python_path: [{EX / 'backend'}]"))
    proc = run(exec_cmd(tmp_path / "out", "--executor", "ray", "--shards", "2", profile=profile), RAY_ADDRESS=address)
    assert proc.returncode == 3
    assert "no node of the Ray cluster offers {'otherdev': 1.0}" in proc.stderr


@pytest.mark.parametrize(("driver", "worker"), [(None, "1"), ("3", "1"), (None, None)])
def test_a_shard_runs_with_the_drivers_thread_setting_not_rays(monkeypatch: pytest.MonkeyPatch, driver: str | None,
                                                               worker: str | None) -> None:
    """Ray gives a task's worker OMP_NUM_THREADS=1 (its CPUs) when unset; the shard's pytest
    must see what the driver had (upstream test_native_mha's fast-path test flips with it)."""
    from testcurator.runner.shards.ray_executor import DRIVER_ENV, _call

    if worker is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", worker)
    seen = _call(lambda name: os.environ.get(name), "OMP_NUM_THREADS", {name: driver for name in DRIVER_ENV})
    assert seen == driver
