"""A local Ray cluster for tests: a head with no CPUs and two worker nodes that each offer
one ``curatedev`` device, on loopback, started here and stopped by process id."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BIN = Path(sys.executable).parent
READY_TIMEOUT_S = 300  # the machine is shared: raylets can take a minute to register

_WAIT = """
import sys, time, ray
address, devices, nodes, timeout = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
deadline = time.time() + timeout
while not ray.is_initialized():
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    except (ConnectionError, RuntimeError):
        if time.time() > deadline:
            raise
        time.sleep(2)
while time.time() < deadline:
    if ray.cluster_resources().get("curatedev", 0) >= devices and sum(n["Alive"] for n in ray.nodes()) >= nodes:
        sys.exit(0)
    time.sleep(1)
sys.exit(f"cluster not ready: {ray.cluster_resources()}")
"""


def _wait(address: str, devices: int, nodes: int, timeout: int) -> str | None:
    """None once the cluster has ``devices`` and ``nodes``; else why not (Ray's last words)."""
    ready = subprocess.run([sys.executable, "-c", _WAIT, address, str(devices), str(nodes), str(timeout)],
                           env=cluster_env(), capture_output=True, text=True, timeout=timeout + 120)
    return None if ready.returncode == 0 else ready.stderr[-2000:]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _node_ports() -> list[str]:
    """Every port a node binds, chosen free: Ray's fixed defaults (the dashboard agent's
    52365...) collide between nodes on one host, and with other clusters on the machine."""
    ports = {name: _free_port() for name in ("node-manager-port", "object-manager-port", "metrics-export-port",
                                             "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
                                             "runtime-env-agent-port")}
    workers = _free_port()
    return ["--block", "--disable-usage-stats", "--node-ip-address=127.0.0.1",
            *(f"--{name}={value}" for name, value in ports.items()),
            f"--worker-port-list={','.join(str(workers + i) for i in range(0, 40, 2))}"]


def cluster_env() -> dict[str, str]:
    # RAY_AUTH_MODE explicit: otherwise a token left in ~/.ray by any earlier local
    # ray.init() turns authentication on for some processes of the cluster and not others.
    return dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_raylet_start_wait_time_s=str(READY_TIMEOUT_S),
                RAY_AUTH_MODE="disabled")


def _sessions_alive(sessions: set[int]) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) in sessions:
                    pids.append(int(entry.name))
            except (ProcessLookupError, PermissionError):
                continue
    return pids


@contextmanager
def ray_cluster(logs: Path) -> Iterator[str]:
    """Yield the cluster's address; every process it started is killed on exit."""
    port = _free_port()
    temp = Path(f"/tmp/rtc{os.getpid()}")  # short: Ray's socket paths must fit in 107 bytes
    head = [str(BIN / "ray"), "start", "--head", f"--port={port}", "--num-cpus=0", "--include-dashboard=false",
            f"--ray-client-server-port={_free_port()}", f"--temp-dir={temp}"]
    worker = [str(BIN / "ray"), "start", f"--address=127.0.0.1:{port}", "--num-cpus=1", '--resources={"curatedev": 1}']
    nodes = [head, worker, worker]
    procs: list[subprocess.Popen[bytes]] = []
    logs.mkdir(parents=True, exist_ok=True)
    address = f"127.0.0.1:{port}"
    try:
        for i, cmd in enumerate(nodes):
            # A worker node that has not joined in half the time is started once more: under
            # the whole suite's load one raylet in several runs never registered in 300 s,
            # while the same tests alone join in seconds.
            for attempt in (1, 2):
                # Ports chosen again at each attempt: a port taken between its check and the
                # raylet's bind stops that raylet, and would stop a retry on the same ports.
                # Own session per node: its raylet and workers are found (and stopped) by it.
                log = logs / f"node{i}-{attempt}.log"
                procs.append(subprocess.Popen([*cmd, *_node_ports()], env=cluster_env(), start_new_session=True,
                                              stdout=log.open("wb"), stderr=subprocess.STDOUT))
                # One node at a time: nodes of one host name their session's sockets by what
                # exists yet, and two starting together pick the same name.
                why = _wait(address, devices=i, nodes=i + 1, timeout=READY_TIMEOUT_S if i == 0 else READY_TIMEOUT_S // 2)
                if why is None:
                    break
                # The log is read only for the message, when the assertion fails.
                assert attempt == 1 and i > 0, f"{why}; the node's log ends: {log.read_text(errors='replace').splitlines()[-5:]}"
                _kill({procs[-1].pid})
                procs.pop().wait(timeout=60)
        yield address
    finally:
        _kill({p.pid for p in procs})
        for proc in procs:
            proc.wait(timeout=60)
        shutil.rmtree(temp, ignore_errors=True)


def _kill(sessions: set[int]) -> None:
    """SIGKILL every process of these sessions (a node's raylet, its workers)."""
    for pid in _sessions_alive(sessions):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def task_processes(name: str) -> list[int]:
    """Pids of Ray workers whose title is ``ray::<name>`` (a running task)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cmdline.startswith(f"ray::{name}"):
            found.append(int(entry.name))
    return found
