"""Cells (``--curate-recycle``): a pytest's memory over thousands of real upstream tests, with
the tests run in the xdist workers themselves and in cells replaced past a size, side by side.

Runs real upstream test files of a PyTorch checkout (default: ``test/test_ops_gradients.py``,
real OpInfos, real gradient checks), inside the tree's own ``pytest.ini`` and conftest, twice
under ``-n 2``: plain, then with ``--curate-recycle MB``. Samples the summed PSS of each
pytest's whole process tree (controller, workers, zygotes, cells, forks) every half second and
prints, for each: the wall, the peak summed PSS, the largest single process's peak, and the
outcomes (from its JUnit XML), then the ratios. PSS shares a page among the processes that map
it, so a cell's fork of the collected session costs what it writes, not what it maps.

    .venv/bin/python bench/recycle.py --tree PYTORCH [--files test/test_ops_gradients.py ...]
        [-k EXPR] [--recycle-mb 1024] [--backend MODULE]

``--backend`` runs the tests on a backend (``--curate-backend``: OpenReg's ``torch_openreg``);
``-k`` narrows them as pytest's own ``-k`` does.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

QUIET = ("-q", "-p", "no:cacheprovider", "-p", "no:randomly")


@dataclass
class Figures:
    wall_s: float
    peak_mb: float
    largest_mb: float
    outcomes: dict[str, int]


def tree_of(root: int) -> list[int]:
    """``root`` and every process under it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def pss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


def run(tree: Path, files: list[str], extra: list[str], junit: Path) -> Figures:
    cmd = [sys.executable, "-m", "pytest", *files, "-n", "2", *QUIET, "--junitxml", str(junit), *extra]
    peak = largest = 0.0
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak, largest
        while not done.wait(0.5):
            sizes = [pss_mb(pid) for pid in tree_of(proc.pid)]
            peak, largest = max(peak, sum(sizes)), max(largest, max(sizes, default=0.0))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    proc.wait()
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    return Figures(wall, peak, largest, outcomes(junit))


def outcomes(junit: Path) -> dict[str, int]:
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for outcome in per_test(junit).values():
        counts[outcome] += 1
    return counts


def per_test(junit: Path) -> dict[str, str]:
    """Each test's outcome in a JUnit XML (passed, failed or skipped)."""
    out: dict[str, str] = {}
    if not junit.exists():
        return out
    for case in ET.parse(junit).getroot().iter("testcase"):
        kind = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        out[f"{case.get('classname')}::{case.get('name')}"] = "failed" if kind in ("failure", "error") else kind
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True, help="a PyTorch checkout (holds pytest.ini and test/)")
    parser.add_argument("--files", nargs="+", default=["test/test_ops_gradients.py"])
    parser.add_argument("-k", dest="keyword", default=None)
    parser.add_argument("--recycle-mb", type=float, default=1024.0)
    parser.add_argument("--backend", default=None, help="a backend module, passed as --curate-backend")
    args = parser.parse_args()
    common = [*(["-k", args.keyword] if args.keyword else []), *(["--curate-backend", args.backend] if args.backend else [])]
    with tempfile.TemporaryDirectory() as tmp:
        plain = run(args.tree, args.files, common, Path(tmp, "plain.xml"))
        cells = run(args.tree, args.files, [*common, "--curate-recycle", f"{args.recycle_mb:g}"], Path(tmp, "cells.xml"))
        before, after = per_test(Path(tmp, "plain.xml")), per_test(Path(tmp, "cells.xml"))
        differ = sorted(t for t in before.keys() | after.keys() if before.get(t) != after.get(t))
    print(f"{'':28}{'wall s':>10}{'peak PSS MB':>14}{'largest MB':>12}  outcomes")
    for name, fig in (("plain (tests in the workers)", plain), (f"cells (--curate-recycle {args.recycle_mb:g})", cells)):
        print(f"{name:28}{fig.wall_s:10.1f}{fig.peak_mb:14.0f}{fig.largest_mb:12.0f}  {fig.outcomes}")
    print(f"cells/plain: wall {cells.wall_s / plain.wall_s:.2f}x, peak PSS {cells.peak_mb / plain.peak_mb:.2f}x, "
          f"largest process {cells.largest_mb / plain.largest_mb:.2f}x; tests whose outcome differs: {len(differ)}")
    for test in differ:
        print(f"  {test}: plain {before.get(test, 'not run')}, cells {after.get(test, 'not run')}")


if __name__ == "__main__":
    main()
