"""The device probe's cost against the draft execution it saves, side by side in one run.

On the example (a copy of examples/upstream, backend examples/backend, device curatedev),
three nightly runs, each with op capture and execution (embeddings off: they are the same
in every run and not what is measured):

1. ``--no-probe`` (fresh state): the draft runs every test the bucket stage did not skip;
2. with the probe (fresh state): the probe replays every captured call once; the bucket
   stage excludes the dtypes/ops/modules it showed fail, and the draft confirms the rest;
3. with the probe again on run 2's state: the capability table is reused (same backend,
   same torch), so the probe replays nothing.

Printed per run: probe seconds, draft execution seconds (the ``refine`` stage: draft run on
the device and refine decisions), instances the draft ran (not skipped), the verification
run's outcomes, and whether the final decisions (mode and exclusions per test) equal run 1's.

    python bench/probe.py [--workers 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from testcurator.pipelines.context import RunContext
from testcurator.pipelines.evaluate import decisions_by_key
from testcurator.pipelines.nightly.run import run_nightly
from testcurator.pipelines.store import RunStore
from testcurator.runner.results.records import read_jsonl

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_TREE = REPO / "examples" / "upstream"
EXAMPLE_BACKEND = REPO / "examples" / "backend" / "backend.yaml"


def _run(tree: Path, out: Path, state: Path, probe: bool, workers: int) -> dict[str, Any]:
    ctx = RunContext.create(torch_root=tree, backend=EXAMPLE_BACKEND, out_dir=out, state_dir=state, probe=probe,
                            embed=False, workers=workers)
    started = time.perf_counter()
    final = run_nightly(ctx)
    wall = time.perf_counter() - started
    run_dir = Path(json.loads((state / "runs" / "latest.json").read_text(encoding="utf-8"))["run_dir"])
    store = RunStore(run_dir)
    timings = store.read_json("timings.json", {})
    draft = read_jsonl(run_dir / "exec" / "results.jsonl")
    files = ctx.run_files(final["files"])
    decisions = {str(k): (d.mode, d.exclude_dtypes, d.exclude_ops, d.exclude_modules)
                 for k, d in decisions_by_key(store, "refine", files).items()}
    return {"wall": wall, "probe": timings.get("probe", 0.0), "draft": timings.get("refine", 0.0),
            "ran": sum(r.outcome != "skipped" for r in draft), "draft_outcomes": Counter(r.outcome for r in draft),
            "verify": store.read_json("verify.json", {}).get("outcomes", {}), "decisions": decisions,
            "probe_figures": store.read_json("probe.json", {})}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="keep the runs under DIR (default: a temporary folder)")
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="bench-probe-")) if args.keep is None else args.keep
    tree = base / "tree"
    if not tree.exists():
        shutil.copytree(EXAMPLE_TREE, tree, ignore=shutil.ignore_patterns("__pycache__"))
    try:
        runs = {
            "no probe": _run(tree, base / "out-noprobe", base / "state-noprobe", False, args.workers),
            "probe (cold table)": _run(tree, base / "out-probe", base / "state-probe", True, args.workers),
            "probe (table reused)": _run(tree, base / "out-probe2", base / "state-probe", True, args.workers),
        }
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    ref = runs["no probe"]
    print(f"example: {EXAMPLE_TREE} on {EXAMPLE_BACKEND.parent.name} ({args.workers} worker(s))")
    print(f"{'run':<22} {'probe s':>8} {'draft s':>8} {'saved s':>8} {'draft ran':>9} {'same final':>10}  verify")
    for name, r in runs.items():
        same = "yes" if r["decisions"] == ref["decisions"] else "NO"
        verify = ", ".join(f"{k} {v}" for k, v in sorted(r["verify"].items()))
        print(f"{name:<22} {r['probe']:>8.1f} {r['draft']:>8.1f} {ref['draft'] - r['draft']:>8.1f} {r['ran']:>9} "
              f"{same:>10}  {verify}")
    for name, r in runs.items():
        if r["decisions"] != ref["decisions"]:
            diff = sorted(k for k in set(r["decisions"]) | set(ref["decisions"])
                          if r["decisions"].get(k) != ref["decisions"].get(k))
            print(f"{name}: final decisions differ from 'no probe' for {len(diff)} test(s):")
            for key in diff[:20]:
                print(f"  {key}: no probe {ref['decisions'].get(key)} -> {r['decisions'].get(key)}")
        if r["probe_figures"]:
            f = r["probe_figures"]
            print(f"{name}: {f['calls']} calls, {f['replayed']} replayed, statuses {f['statuses']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
