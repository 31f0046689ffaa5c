"""Benchmark: a generated PyTorch-size tree through scope, memory and bucket (``--no-execute``).

    python bench/scale.py [--files 1000] [--tests-per-file 56] [--fractions 1] [--shards 1]
                          [--executor local] [--no-real-costs] [--capture-budget-s S] [--profile] [--keep DIR]

For each size (``--fractions 0.05,0.1`` runs 5% and 10% of ``--files``, one after the
other, so the per-stage scaling shows side by side), a tree from bench/gen_tree.py (real
``op_db`` ``@ops`` lists, real ``instantiate_device_type_tests``) goes through
``testcurator run --no-execute`` with the CPU op capture on and embeddings off, on a cold
state dir, with the offline brain. Printed per stage: wall seconds and peak RSS (the
driver, and the largest process it started), then how each stage grew from the smallest
size to the largest against how the tree grew. The memory stage is split into its steps:

- ``index``: the tree-sitter index (memory/builder.py);
- ``static map``, ``device map``: the collect-only passes on CPU and on the device (every
  instance's identity; what the device instantiates); they run beside the index, so the
  steps add up to more than ``memory (all)``;
- ``capture: tests``: the capture's pytest processes (the instances memory/capture_select.py
  keeps run once on CPU);
- ``capture: after tests``: what the driver does with their output (event logs folded
  into records, durations stored, capture file written);
- ``op map ingest``, ``evidence``, ``summaries``.

Every generated test burns CPU as a real upstream test does (``--no-real-costs``: it costs
what its few ops cost): a draw from gen_tree.REAL_COST_QUANTILES, measured on 731 instances
of 11 real upstream files (median 14 ms, mean 127 ms, 1% over 2.3 s). Without it the
capture looked free, and a figure no real tree reproduces (issue 23). Printed besides: what
the capture ran and left out, its share of the run, and its test-seconds per instance kept.

The goals (issues 11, 23): everything after the capture's tests is linear and under a minute
at 1,000 files / >= 100,000 instances; the whole cold run under 20 minutes on 2 cores with
real costs, peak RSS under 4 GB.
``--profile`` prints the driver's own hottest functions (cProfile; subprocesses excluded).

``--replay 10000,100000``: the steps after the capture's tests alone, at those sizes, on
the real output of the largest size's capture (event log, capture lines, static map)
copied under other folder names up to N instances: the same functions as the pipeline
(capture_shards.shard_output, the durations store, the op map ingest, the evidence),
without running N tests. This is how to see those steps at PyTorch size on a busy machine.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import json
import io
import os
import pstats
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_tree import generate
from pipeline import GEN_BACKEND, collectable
from testcurator.memory import capture_run, capture_shards, stage
from testcurator.pipelines.nightly import graph as nightly
from testcurator.pipelines.nightly import steps
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.nightly.run import run_nightly
from testcurator.runner.shards.durations import DurationStore

PAGE = os.sysconf("SC_PAGE_SIZE")
STEPS = ("scope", "memory (all)", "index", "static map", "device map", "capture: tests", "capture: after tests", "op map ingest", "evidence",
         "summaries", "bucket", "emit", "report")
AFTER_TESTS = ("capture: after tests", "op map ingest", "evidence")


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class Meter:
    """Wall time per step, and peak RSS (driver; largest child) sampled while it runs."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.wall: dict[str, float] = {}
        self.driver: dict[str, int] = {}
        self.child: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> Meter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        me = os.getpid()
        while not self._stop.wait(0.5):
            if not self.stack:
                continue
            step = self.stack[-1]
            self.driver[step] = max(self.driver.get(step, 0), _rss(me))
            kids = [_rss(pid) for pid in _descendants(me)]
            self.child[step] = max(self.child.get(step, 0), max(kids, default=0))

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        self.stack.append(name)
        start = time.perf_counter()
        try:
            yield
        finally:
            self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - start
            self.stack.remove(name)  # steps may overlap (the static map runs beside the capture)


def _timed(meter: Meter, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)  # langgraph reads a node's signature through __wrapped__
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with meter.step(name):
            return fn(*args, **kwargs)

    return wrapper


class _TimedExecutor:
    """An executor whose ``run`` (all shards, start to end) is the step "capture: tests"."""

    def __init__(self, inner: Any, meter: Meter) -> None:
        self.inner, self.run = inner, _timed(meter, "capture: tests", inner.run)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@contextmanager
def instrumented(meter: Meter, executor: str = "local") -> Iterator[None]:
    """Time the steps by wrapping the functions that do them (restored afterwards).

    "capture: tests" is the capture's pytest processes on the local executor. Elsewhere
    (Ray) they run in other processes, out of the driver's sight: there it is the
    executor's whole run of the shards, which also holds each shard reading its own output
    (the rest of "after tests" stays in the driver)."""
    patches = [(nightly, "scope", "scope"), (nightly, "memory", "memory (all)"), (nightly, "bucket_file", "bucket"), (nightly, "draft", "bucket"),
               (nightly, "emit", "emit"), (nightly, "report", "report"), (nightly, "_summaries", "summaries"),
               (stage, "build", "index"), (stage, "_static_map", "static map"), (stage, "_device_map", "device map"),
               (capture_run, "run_capture", "capture: after tests"), (capture_shards, "run_bounded", "capture: tests"),
               (stage, "_ingest", "op map ingest"), (stage, "write_evidence", "evidence"), (stage, "gather", "evidence"),
               (stage, "read_capture", "evidence")]
    if executor != "local":
        patches.remove((capture_shards, "run_bounded", "capture: tests"))
    saved = [(module, attr, getattr(module, attr)) for module, attr, _ in patches]
    for module, attr, name in patches:
        setattr(module, attr, _timed(meter, name, getattr(module, attr)))
    if executor != "local":
        make = steps.executor
        saved.append((steps, "executor", make))
        steps.executor = functools.wraps(make)(lambda *a, **k: _TimedExecutor(make(*a, **k), meter))  # type: ignore[assignment]
    try:
        yield
    finally:
        for module, attr, original in saved:
            setattr(module, attr, original)


def _tree(root: Path, files: int, tests_per_file: int, real_costs: bool) -> tuple[int, int]:
    stats = generate(root, files, tests_per_file, seed=0, real_costs=real_costs)
    collectable(root)
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n", encoding="utf-8")
    return stats.files, stats.tests


def _instances(state: Path) -> int:
    import sqlite3

    with sqlite3.connect(state / "ops.sqlite") as conn:
        return conn.execute("SELECT count(DISTINCT node_id) FROM records").fetchone()[0]


def run_size(work: Path, files: int, args: argparse.Namespace) -> dict[str, Any]:
    root, state = work / "tree", work / "state"
    n_files, n_tests = _tree(root, files, args.tests_per_file, args.real_costs)
    backend = work / "backend.yaml"
    backend.write_text(_backend(), encoding="utf-8")
    ctx = RunContext.create(torch_root=root, backend=backend, out_dir=work / "out", state_dir=state, execute=False,
                            embed=False, capture_ops=True, workers=args.workers, shards=args.shards,
                            capture_budget_s=args.capture_budget_s,
                            executor=args.executor, say=lambda m: print(f"    {m}", flush=True))
    meter = Meter()
    load = os.getloadavg()  # the machine may be shared: the figures mean little without it
    profile = cProfile.Profile() if args.profile else None
    with meter, instrumented(meter, args.executor):
        start = time.perf_counter()
        if profile:
            profile.enable()
        run_nightly(ctx)
        if profile:
            profile.disable()
        total = time.perf_counter() - start
    # run_capture's time includes its tests: "after tests" is the rest of it.
    meter.wall["capture: after tests"] = meter.wall.get("capture: after tests", 0.0) - meter.wall.get("capture: tests", 0.0)
    if profile:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(20)
        print(out.getvalue())
    run_dir = next(p for p in (state / "runs").iterdir() if p.is_dir())
    capture = json.loads((run_dir / "memory.json").read_text(encoding="utf-8")).get("capture") or {}
    return {"load": (load, os.getloadavg()), "files": n_files, "tests": n_tests, "instances": _instances(state),
            "total": total, "wall": meter.wall, "capture": capture, "capture_cpu_s": _capture_seconds(state),
            "driver": meter.driver, "child": meter.child, "run_dir": run_dir}


EXAMPLE_BACKEND = Path(__file__).resolve().parents[1] / "examples" / "backend"


def _backend() -> str:
    """The generated tree's profile on a device that registers (the example backend,
    curatedev): its collection says what it instantiates (``@onlyCUDA``, ``@onlyCPU`` are
    not), as a real backend's would."""
    return (GEN_BACKEND.replace("name: gendev", "name: curatedev")
            + f'backend_module: "curatedev.testing:setup_device_type_tests"\npython_path: ["{EXAMPLE_BACKEND}"]\n')


def _capture_seconds(state: Path) -> float:
    """The capture's tests' own time, summed (durations store, source capture)."""
    import sqlite3

    with sqlite3.connect(state / "durations.sqlite") as conn:
        return conn.execute("SELECT coalesce(sum(seconds), 0) FROM durations WHERE source = 'capture'").fetchone()[0]


def _copies(src: Path, dst: Path, copies: int) -> None:
    """``src``'s lines ``copies`` times, node ids moved under ``test/cK/`` for copy K."""
    with src.open(encoding="utf-8") as fh:
        lines = fh.readlines()
    with dst.open("w", encoding="utf-8") as out:
        for k in range(copies):
            out.writelines(line.replace('"test/', f'"test/c{k}/') for line in lines)


def replay(run_dir: Path, base_instances: int, sizes: list[int], work: Path) -> None:
    import resource

    shard = next((run_dir / "capture").iterdir())
    print(f"\nafter the capture's tests, replayed from {base_instances} captured instances (driver only):")
    print(f"  {'instances':>9s} {'shard out':>9s} {'durations':>9s} {'read':>7s} {'ingest':>7s} {'evidence':>8s} "
          f"{'total':>7s} {'per inst':>9s} {'peak MB':>8s}")
    for size in sizes:
        copies = max(1, round(size / base_instances))
        folder = work / f"replay-{size}"
        folder.mkdir(parents=True, exist_ok=True)
        for name, src in (("events.jsonl", shard / "events.jsonl"), ("captured.jsonl", shard / "captured.jsonl"),
                          ("static.jsonl", run_dir / "static.jsonl")):
            _copies(src, folder / name, copies)
        state = folder / "state"
        times = []
        start = time.perf_counter()
        output = capture_shards.shard_output([folder / "captured.jsonl"], folder / "events.jsonl")
        (folder / "all.jsonl").write_text(output.captured, encoding="utf-8")
        times.append(time.perf_counter() - start)
        start = time.perf_counter()
        with DurationStore(state) as store:
            store.record(output.records, "capture")
        times.append(time.perf_counter() - start)
        del output
        start = time.perf_counter()
        records = stage.read_capture([folder / "static.jsonl", folder / "all.jsonl"])
        times.append(time.perf_counter() - start)
        start = time.perf_counter()
        stage._ingest(state, records)
        times.append(time.perf_counter() - start)
        start = time.perf_counter()
        stage.write_evidence(folder / "evidence.json", stage.gather(records))
        times.append(time.perf_counter() - start)
        del records
        n = base_instances * copies
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(f"  {n:9d} " + " ".join(f"{t:{w}.1f}" for t, w in zip(times, (9, 9, 7, 7, 8)))
              + f" {sum(times):7.1f} {sum(times) / n * 1e3:7.2f}ms {_mb(peak):>8s}", flush=True)
        shutil.rmtree(folder, ignore_errors=True)


def _mb(n: int) -> str:
    return f"{n / 2**20:6.0f}" if n else "     -"


def report(results: list[dict[str, Any]]) -> None:
    for r in results:
        print(f"\n{r['files']} files, {r['tests']} test functions, {r['instances']} instances: "
              f"whole --no-execute run {r['total']:.1f} s")
        before, after = r["load"]
        print(f"  load average (1/5/15 min) at start {'/'.join(f'{x:.1f}' for x in before)}, "
              f"at end {'/'.join(f'{x:.1f}' for x in after)}; {os.cpu_count()} CPUs")
        print(f"  {'step':24s} {'wall s':>8s} {'driver MB':>10s} {'child MB':>9s}")
        for step in STEPS:
            print(f"  {step:24s} {r['wall'].get(step, 0.0):8.1f} {_mb(r['driver'].get(step, 0)):>10s} "
                  f"{_mb(r['child'].get(step, 0)):>9s}")
        cap = r["capture"]
        if cap:
            share = r["wall"].get("capture: tests", 0.0) / max(r["total"], 1e-9)
            print(f"  capture: ran {cap['kept']} of {cap['instances']} CPU instances "
                  f"(left out: {', '.join(f'{n} {why}' for why, n in cap['left_out'].items()) or 'none'}); "
                  f"its tests {r['wall'].get('capture: tests', 0.0):.1f} s wall = {100 * share:.0f}% of the run; "
                  f"{r['capture_cpu_s']:.1f} test-seconds, {r['capture_cpu_s'] / max(cap['kept'], 1):.3f} s per "
                  f"instance kept")
        after = sum(r["wall"].get(s, 0.0) for s in AFTER_TESTS)
        print(f"  after the capture's tests (merge, ingest, op map, evidence): {after:.1f} s "
              f"({after / max(r['instances'], 1) * 1e3:.2f} ms per instance)")
    if len(results) > 1:
        small, big = results[0], results[-1]
        grew = big["instances"] / max(small["instances"], 1)
        print(f"\nscaling {small['instances']} -> {big['instances']} instances ({grew:.1f}x): growth per step")
        for step in STEPS:
            a, b = small["wall"].get(step, 0.0), big["wall"].get(step, 0.0)
            if a > 0.05:
                print(f"  {step:24s} {b / a:6.1f}x")
        print(f"  {'whole run':24s} {big['total'] / small['total']:6.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--tests-per-file", type=int, default=56, help="56: about 100 instances per file")
    ap.add_argument("--fractions", default="1", help="sizes as fractions of --files, e.g. 0.05,0.1")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--executor", default="local")
    ap.add_argument("--real-costs", action=argparse.BooleanOptionalAction, default=True,
                    help="every generated test burns CPU drawn from real upstream tests' costs (gen_tree.py)")
    ap.add_argument("--capture-budget-s", type=float, default=None, help="run --capture-budget-s (default: run's own default budget, "
                    "memory/capture_run.DEFAULT_CAPTURE_BUDGET_S)")
    ap.add_argument("--profile", action="store_true", help="cProfile the driver (not its subprocesses)")
    ap.add_argument("--replay", default="", help="instance counts to replay the steps after the tests at")
    ap.add_argument("--keep", type=Path, help="work here and keep it (default: a temp dir, removed)")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    results = []
    try:
        for fraction in sorted(float(f) for f in args.fractions.split(",")):
            files = max(1, round(args.files * fraction))
            print(f"size {fraction:g}: {files} files", flush=True)
            results.append(run_size(work / f"size-{files}", files, args))
        report(results)
        if args.replay:
            replay(results[-1]["run_dir"], results[-1]["instances"], [int(n) for n in args.replay.split(",")], work)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
