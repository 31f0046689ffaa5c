"""Benchmark: `testcurator upgrade` vs a full run, after 5% of the tests changed upstream.

    python bench/upgrade.py [--sizes 40x20,100x40,300x40] [--changed 0.05] [--embed] [--no-capture-ops]

For each size (files x tests per file), side by side:

1. A generated tree (bench/gen_tree.py) is curated once by a full run (the "old" config and
   a warm state dir: memory, op capture cache).
2. A copy gets ``--changed`` of its tests' bodies changed (gen_tree.touch_tests).
3. Each from its own copy of that warm state: a full `run` over the new tree, and an
   `upgrade` from the old tree and config to the new tree. Both use the offline brain and
   ``--no-execute`` (a generated tree has no device to run on; the draft's execution would
   scale with the delta the same way as the bucket stage does).

Prints wall times, the ratio (goal <= 0.15) in wall and in CPU time (this process and its
children: steadier than wall time on a shared machine), the seconds of each stage of both runs, the
pytest processes each started (and their wall time), and how many tests each asked the
brain about (what an LLM brain would be called for; goal: only the delta).

Why three sizes: 40x20 is the old default (its figure stays comparable with earlier
reports). Each pytest a run starts pays a fixed import of Python, pytest, torch and op_db
(about 4 s here); the full run starts two (static map, capture) side by side, the delta run
one, which the upgrade starts first thing so that its imports overlap the comparison of the
trees (runner/warm.py). On a 40-file tree that one import is a third of the full run, and
the delta (0.2 s) leaves nothing to overlap it with: the ratio cannot reach 0.15 there
until a full run takes 27 s or more. The larger trees show the ratio with the fixed cost a
smaller part of the work. A PyTorch-size full run takes hours, where the fixed cost
vanishes. Neither is PyTorch: a generated test runs in milliseconds (collection dominates
both runs, where upstream's tests dominate), and 5% of random tests touch 87-90% of the
files (real upstream changes cluster in fewer files).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_tree import generate, touch_tests
from testcurator.agents.offline.brain import OfflineBrain
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.report_md import ordered_timings
from testcurator.pipelines.nightly.run import run_nightly
from testcurator.pipelines.upgrade.workflow import UpgradeOptions, run_upgrade
from testcurator.runner.warm import WarmPytest
from typing_extensions import Self

BACKEND = """\
schema_version: 1
name: benchdev
device: {kind: privateuse1, name: benchdev}
hooks: [eager_ops, autograd]
preferences: ["Eager operator correctness matters most."]
supported_dtypes: [{name: float32}, {name: float16}, {name: bfloat16}, {name: int64}]
discover_ops: false
"""


class Counter:
    """Counts the tests the brain is asked to bucket or refine (wraps the offline brain)."""

    def __init__(self) -> None:
        self.items = 0
        self._bucket, self._refine = OfflineBrain.bucket, OfflineBrain.refine

    def __enter__(self) -> Self:
        counter = self

        def bucket(brain: Any, requests: Any, ctx: Any) -> Any:
            counter.items += len(requests)
            return counter._bucket(brain, requests, ctx)

        def refine(brain: Any, requests: Any, ctx: Any) -> Any:
            counter.items += len(requests)
            return counter._refine(brain, requests, ctx)

        OfflineBrain.bucket, OfflineBrain.refine = bucket, refine  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        OfflineBrain.bucket, OfflineBrain.refine = self._bucket, self._refine  # type: ignore[method-assign]


def _ctx(root: Path, backend: Path, out: Path, state: Path, args: argparse.Namespace) -> RunContext:
    return RunContext.create(torch_root=root, backend=backend, out_dir=out, state_dir=state, execute=False,
                             embed=args.embed, capture_ops=args.capture_ops, workers=args.workers)


def _valid_ops(root: Path) -> None:
    # gen_tree picks OpInfo names like 'relu' that op_db spells 'nn.functional.relu'; an
    # empty @ops list is a collection error, so match on either end of the dotted name.
    for path in root.rglob("test_*.py"):
        text = re.sub(r"op\.name == '(\w+)'", r"'\1' in (op.name.split('.')[0], op.name.split('.')[-1])",
                      path.read_text())
        path.write_text(text)


class PytestCounter:
    """Counts the pytest processes a run starts and their wall time (wraps subprocess.run,
    which the capture and the static collection start them with, and the run of a pytest
    started ahead, runner/warm.py, timed from when it got its arguments: its imports
    overlapped other work)."""

    def __init__(self) -> None:
        self.count, self.seconds = 0, 0.0
        self._run = subprocess.run
        self._warm_run = WarmPytest.run

    def __enter__(self) -> Self:
        counter = self

        def run(argv: Any, *args: Any, **kwargs: Any) -> Any:
            if "pytest" not in list(map(str, argv)):
                return counter._run(argv, *args, **kwargs)
            start = time.perf_counter()
            try:
                return counter._run(argv, *args, **kwargs)
            finally:
                counter.count += 1
                counter.seconds += time.perf_counter() - start

        def warm_run(warm: WarmPytest, argv: Any, log: Path) -> int:
            start = time.perf_counter()
            try:
                return counter._warm_run(warm, argv, log)
            finally:
                counter.count += 1
                counter.seconds += time.perf_counter() - start

        subprocess.run = run  # type: ignore[assignment]
        WarmPytest.run = warm_run  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.run = self._run  # type: ignore[assignment]
        WarmPytest.run = self._warm_run  # type: ignore[method-assign]


def _cpu() -> float:
    """CPU seconds of this process and of its children that ended (the pytests, the parse
    pool): on a shared machine wall time follows the load, CPU time much less."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@dataclass
class Timed:
    seconds: float
    cpu: float
    asked: int  # tests the brain was asked about
    pytests: int
    pytest_s: float
    stages: dict[str, float]
    result: Any = None


def _timed(fn: Any, out: Path) -> Timed:
    with Counter() as counter, PytestCounter() as pytests:
        start, cpu = time.perf_counter(), _cpu()
        result = fn()
        seconds, cpu = time.perf_counter() - start, _cpu() - cpu
    stages = ordered_timings(json.loads((out / "report.json").read_text(encoding="utf-8")).get("timings_s", {}))
    if (out / "upgrade.json").exists():  # the upgrade's own phases around its delta run
        phases = json.loads((out / "upgrade.json").read_text(encoding="utf-8"))["timings_s"]
        stages = {"upgrade: delta": phases["delta"], "upgrade: carry over": phases["carry over"],
                  **{f"delta run: {k}": v for k, v in stages.items() if k != "total"}}
    return Timed(seconds, cpu, counter.items, pytests.count, pytests.seconds,
                 {k: v for k, v in stages.items() if k != "total"}, result)


@dataclass
class Figures:
    size: str
    tests: int
    changed: int
    changed_files: int
    files: int
    cold: Timed
    full: Timed
    up: Timed


def measure(files: int, per_file: int, args: argparse.Namespace, work: Path) -> Figures:
    work.mkdir(parents=True, exist_ok=True)
    old, new, backend = work / "old", work / "new", work / "backend.yaml"
    backend.write_text(BACKEND, encoding="utf-8")
    stats = generate(old, files, per_file, seed=0)
    _valid_ops(old)
    (old / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n", encoding="utf-8")
    cold = _timed(lambda: run_nightly(_ctx(old, backend, work / "out-old", work / "state", args)), work / "out-old")
    shutil.copytree(old, new)
    changed, touched = touch_tests(new, args.changed)
    for name in ("state-full", "state-upgrade"):
        shutil.copytree(work / "state", work / name)
    full = _timed(lambda: run_nightly(_ctx(new, backend, work / "out-full", work / "state-full", args)), work / "out-full")
    up = _timed(lambda: run_upgrade(UpgradeOptions(
        old_root=old, config=work / "out-old" / "configs",
        run=_ctx(new, backend, work / "out-up", work / "state-upgrade", args))), work / "out-up")
    return Figures(f"{files}x{per_file}", stats.tests, changed, touched, stats.files, cold, full, up)


def _print(figures: list[Figures], args: argparse.Namespace) -> None:
    width = 22
    names = [f.size + (" (old default)" if f.size == "40x20" else "") for f in figures]

    def row(label: str, cells: list[str]) -> None:
        print(f"{label:<38}" + "".join(f"{c:>{width}}" for c in cells))

    print(f"capture_ops={args.capture_ops} embed={args.embed}; --no-execute; {args.changed:.0%} of the tests changed; "
          f"wall seconds (this machine's load: see `uptime`)")
    row("size (files x tests per file)", names)
    row("tests; changed (in files)", [f"{f.tests}; {f.changed} ({f.changed_files}/{f.files})" for f in figures])
    row("first full run (old tree, cold state)", [f"{f.cold.seconds:.2f}" for f in figures])
    row("full run (new tree, warm state)", [f"{f.full.seconds:.2f}" for f in figures])
    row("upgrade old -> new (warm state)", [f"{f.up.seconds:.2f}" for f in figures])
    row("RATIO upgrade / full run (goal <= 0.15)", [f"{f.up.seconds / f.full.seconds:.3f}" for f in figures])
    row("CPU s: full run / upgrade", [f"{f.full.cpu:.1f} / {f.up.cpu:.1f}" for f in figures])
    row("RATIO in CPU time", [f"{f.up.cpu / f.full.cpu:.3f}" for f in figures])
    row("pytest processes: full run", [f"{f.full.pytests} ({f.full.pytest_s:.1f} s)" for f in figures])
    row("pytest processes: upgrade", [f"{f.up.pytests} ({f.up.pytest_s:.1f} s)" for f in figures])
    row("brain asked about: full / upgrade", [f"{f.full.asked} / {f.up.asked}" for f in figures])
    for title, pick in (("full run", lambda f: f.full), ("upgrade", lambda f: f.up)):
        print(f"-- {title}, seconds per stage")
        for stage in dict.fromkeys(k for f in figures for k in pick(f).stages):
            row(f"  {stage}", [f"{pick(f).stages[stage]:.2f}" if stage in pick(f).stages else "-" for f in figures])
    for f in figures:
        data, counts = f.up.result, f.up.result["counts"]
        print(f"{f.size}: {data['evaluated']}; changed {counts['changed']}, added {counts['added']}, moved "
              f"{counts['moved']}, removed {counts['removed']}; LLM calls {data['usage']['calls']} (offline brain); "
              f"brain items only for the delta: {f.up.asked == counts['evaluated']}")


def _size(text: str) -> tuple[int, int]:
    files, _, per_file = text.partition("x")
    return int(files), int(per_file)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="40x20,100x40,300x40",
                    help="comma-separated FILESxTESTS_PER_FILE, measured side by side (default: the old default "
                         "40x20, 100x40 and 300x40; about 8 minutes on 2 cores)")
    ap.add_argument("--changed", type=float, default=0.05)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--embed", action="store_true", help="build embeddings too (slower; off by default)")
    ap.add_argument("--no-capture-ops", dest="capture_ops", action="store_false")
    ap.add_argument("--keep", type=Path, help="work here and keep it (default: a temp dir, removed)")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-upgrade-"))
    try:
        figures = [measure(*_size(size), args, work / size) for size in args.sizes.split(",")]
        _print(figures, args)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
