"""Executor overhead: `testcurator exec` on the example, local vs Ray, side by side in one run.

The curated example config on the example backend (``examples/configs/example.yaml``,
``examples/upstream``, ``examples/backend/backend.yaml``), through the installed
``testcurator`` entry point, timed as:

1. local executor, one shard (the default);
2. local executor, 2 shards (one after the other: the cost of sharding itself);
3. Ray, 2 shards, no ``RAY_ADDRESS``: the executor starts a one-node cluster for the run
   (start-up included);
4. Ray, 2 shards on a running cluster (``ray start --head`` offering two curatedev
   devices, started and stopped here): the steady-state overhead of tasks and transfers.

Each run's outcomes are compared with the first (they must be identical). On one machine
the shards of 3 and 4 share its cores, so this measures overhead, not speed-up: with one
device per host, the speed-up comes from more hosts.

    .venv/bin/python bench/executors.py [--file test/test_view_ops.py]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
BIN = Path(sys.executable).parent


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def exec_run(out: Path, extra: list[str], env: dict[str, str], files: list[str]) -> tuple[float, dict[str, str], int]:
    cmd = [str(BIN / "testcurator"), "exec", "--config", str(EX / "configs" / "example.yaml"), "--torch-root",
           str(EX / "upstream"), "--backend", str(EX / "backend" / "backend.yaml"), "--out", str(out), "-q",
           "--state-dir", str(out.parent / "state"), *extra, *files]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    # 1 is a verdict, not a fault: example.yaml shows every config feature and is written for
    # CPU, so on curatedev some of its mandatory tests fail (the same ones in every run).
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return wall, {r["nodeid"]: r["outcome"] for r in rows}, proc.returncode


def start_head(temp: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _port()
    ports = {name: _port() for name in ("node-manager-port", "object-manager-port", "metrics-export-port",
                                         "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
                                         "runtime-env-agent-port", "ray-client-server-port")}
    cmd = [str(BIN / "ray"), "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
           '--resources={"curatedev": 2}', "--include-dashboard=false", "--disable-usage-stats",
           "--node-ip-address=127.0.0.1", f"--temp-dir={temp}", *(f"--{k}={v}" for k, v in ports.items())]
    head = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled"))
    address = f"127.0.0.1:{port}"
    probe = "import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); print(ray.cluster_resources())"
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    for _ in range(60):
        if subprocess.run([sys.executable, "-c", probe, address], capture_output=True, env=env,
                          timeout=120).returncode == 0:
            return head, address
        time.sleep(2)
    os.killpg(head.pid, signal.SIGKILL)
    raise SystemExit("the Ray head did not come up")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", action="append", default=[], help="narrow to these example files (repeatable)")
    args = parser.parse_args()
    files = [str(EX / "upstream" / f) for f in args.file]
    # Ray's own local clusters default to token authentication and write ~/.ray/auth_token;
    # the bench leaves the home folder alone and runs every cluster without it (loopback).
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
    env.pop("RAY_ADDRESS", None)
    with tempfile.TemporaryDirectory(prefix="tcbench") as tmp:
        root = Path(tmp)
        results = []
        for label, extra in (("local, 1 shard", []), ("local, 2 shards", ["--shards", "2"]),
                             ("ray (own local cluster), 2 shards", ["--executor", "ray", "--shards", "2"])):
            results.append((label, *exec_run(root / label.replace(" ", "_"), extra, env, files)))
        temp = Path(f"/tmp/tcb{os.getpid()}")
        head, address = start_head(temp)
        try:
            results.append(("ray (running cluster), 2 shards",
                            *exec_run(root / "ray_running", ["--executor", "ray", "--shards", "2"],
                                      dict(env, RAY_ADDRESS=address), files)))
        finally:
            os.killpg(head.pid, signal.SIGKILL)  # the head's session: only what it started
            head.wait()
            subprocess.run(["rm", "-rf", str(temp)], check=False)
    base_wall, base, base_rc = results[0][1], results[0][2], results[0][3]
    print(f"{len(base)} tests; outcomes identical in every run: {all(r[2] == base for r in results)}; "
          f"exit codes identical: {all(r[3] == base_rc for r in results)} ({base_rc})")
    for label, wall, _, _ in results:
        print(f"  {label:36s} {wall:7.1f} s   {wall / base_wall:5.2f}x local")


if __name__ == "__main__":
    main()
