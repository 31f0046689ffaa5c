"""Memory index throughput, side by side with tree-sitter parsing alone, in one run.

1. A generated tree (bench/gen_tree.py; default 1,000 files, 52,000 test functions):
   tree-sitter parse only, CPython compile check only, then cold ``memory build``s with
   one process and with the default worker count (no embeddings: embedding cost is
   bench/embeddings.py's subject), then against the auto build: a warm rebuild with
   nothing changed, and a rebuild after changing 1% of the tests (random ones).
2. The installed torch package's own Python files (``torch/**/*.py``): parse only vs
   cold build vs warm rebuild.

    python bench/memory_index.py [--files 1000] [--tests-per-file 52] [--skip-torch] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_tree import generate, touch_tests  # noqa: E402

from testcurator.memory.builder import BuildStats, build, discover  # noqa: E402
from testcurator.memory.index import compile_error, make_parser  # noqa: E402


def parse_only(files: Sequence[Path]) -> tuple[float, int]:
    """Seconds to read + tree-sitter-parse every file, and bytes read."""
    parser = make_parser()
    start = time.perf_counter()
    total = 0
    for path in files:
        data = path.read_bytes()
        total += len(data)
        parser.parse(data)
    return time.perf_counter() - start, total


def compile_only(files: Sequence[Path]) -> float:
    start = time.perf_counter()
    for path in files:
        compile_error(path.read_bytes(), str(path))
    return time.perf_counter() - start


def timed_build(root: Path, state: Path, globs: list[str] | None, jobs: int | None = None) -> tuple[float, BuildStats]:
    start = time.perf_counter()
    stats = build(root, globs, state, embed=False, jobs=jobs)
    return time.perf_counter() - start, stats


def rates(label: str, seconds: float, files: int, tests: int, nbytes: int) -> None:
    print(f"  {label:<26} {seconds:8.2f} s  {files / seconds:8.0f} files/s  {tests / seconds:9.0f} tests/s"
          f"  {nbytes / seconds / 1e6:6.2f} MB/s")


def run_tree(title: str, root: Path, state: Path, globs: list[str] | None, touch: bool) -> None:
    files = [p for p, _ in discover(root, globs)]
    print(f"\n== {title}: {root}")
    t_parse, nbytes = parse_only(files)
    t_compile = compile_only(files)
    t_cold1, _ = timed_build(root, state.with_name(state.name + "-serial"), globs, jobs=1)
    t_cold, cold = timed_build(root, state, globs)
    tests = cold.tests_total
    print(f"  {len(files)} files, {nbytes / 1e6:.1f} MB, {tests} generic tests indexed, "
          f"{cold.files_failed} file(s) failed")
    rates("tree-sitter parse only", t_parse, len(files), tests, nbytes)
    rates("CPython compile check only", t_compile, len(files), tests, nbytes)
    rates("cold build, 1 process", t_cold1, len(files), tests, nbytes)
    rates(f"cold build, {os.cpu_count()} cpus (auto)", t_cold, len(files), tests, nbytes)
    print(f"  cold build / parse only      {t_cold1 / t_parse:8.2f} x (1 process), {t_cold / t_parse:.2f} x (auto)")
    t_warm, warm = timed_build(root, state, globs)
    print(f"  warm rebuild (no change)     {t_warm:8.3f} s  ratio warm/cold {t_warm / t_cold:.4f}"
          f"  (goal <= 0.05; {warm.files_parsed} files parsed)")
    if touch:
        n_tests, n_files = touch_tests(root, 0.01)
        t_touch, touched = timed_build(root, state, globs)
        print(f"  after changing 1% of tests   {t_touch:8.3f} s  ratio/cold {t_touch / t_cold:.4f}"
              f"  ({n_tests} tests in {n_files} files changed; {touched.files_parsed} files re-parsed)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--tests-per-file", type=int, default=52)
    ap.add_argument("--skip-torch", action="store_true", help="skip the installed torch package")
    ap.add_argument("--keep", type=Path, help="work here and keep the tree (default: a temp dir)")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="tc-bench-memory-"))
    try:
        tree = work / "tree"
        if tree.exists():
            shutil.rmtree(tree)
        start = time.perf_counter()
        gen = generate(tree, args.files, args.tests_per_file)
        print(f"generated {gen.files} files, {gen.tests} test functions, {gen.bytes / 1e6:.1f} MB "
              f"in {time.perf_counter() - start:.1f} s")
        run_tree("generated tree", tree, work / "state-gen", None, touch=True)
        if not args.skip_torch:
            import torch

            root = Path(torch.__file__).resolve().parent
            run_tree("installed torch package", root, work / "state-torch", ["**/*.py"], touch=False)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
