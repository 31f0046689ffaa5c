"""Benchmark: `testcurator upgrade` vs a full run, after 5% of the tests changed upstream.

    python bench/upgrade.py [--files 40] [--tests-per-file 20] [--changed 0.05] [--embed] [--no-capture-ops]

1. A generated tree (bench/gen_tree.py) is curated once by a full run (the "old" config and
   a warm state dir: memory, op capture cache).
2. A copy gets ``--changed`` of its tests' bodies changed (gen_tree.touch_tests).
3. Side by side, each from its own copy of that warm state: a full `run` over the new tree,
   and an `upgrade` from the old tree and config to the new tree. Both use the offline
   brain and ``--no-execute`` (a generated tree has no device to run on; the draft's
   execution would scale with the delta the same way as the bucket stage does).

Prints wall times, the ratio (goal <= 0.15), and how many tests each asked the brain
about (what an LLM brain would be called for; goal: only the delta).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_tree import generate, touch_tests
from testcurator.agents.offline import OfflineBrain
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.run import run_nightly
from testcurator.pipelines.upgrade import UpgradeOptions, run_upgrade
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


def _timed(fn: Any) -> tuple[float, int, Any]:
    with Counter() as counter:
        start = time.perf_counter()
        result = fn()
        return time.perf_counter() - start, counter.items, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--tests-per-file", type=int, default=20)
    ap.add_argument("--changed", type=float, default=0.05)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--embed", action="store_true", help="build embeddings too (slower; off by default)")
    ap.add_argument("--no-capture-ops", dest="capture_ops", action="store_false")
    ap.add_argument("--keep", type=Path, help="work here and keep it (default: a temp dir, removed)")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-upgrade-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        old, new, backend = work / "old", work / "new", work / "backend.yaml"
        backend.write_text(BACKEND, encoding="utf-8")
        stats = generate(old, args.files, args.tests_per_file, seed=0)
        _valid_ops(old)
        (old / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n", encoding="utf-8")
        t_old, _, _ = _timed(lambda: run_nightly(_ctx(old, backend, work / "out-old", work / "state", args)))
        shutil.copytree(old, new)
        changed, files = touch_tests(new, args.changed)
        for name in ("state-full", "state-upgrade"):
            shutil.copytree(work / "state", work / name)
        t_full, asked_full, _ = _timed(
            lambda: run_nightly(_ctx(new, backend, work / "out-full", work / "state-full", args)))
        t_up, asked_up, data = _timed(lambda: run_upgrade(UpgradeOptions(
            old_root=old, config=work / "out-old" / "configs",
            run=_ctx(new, backend, work / "out-up", work / "state-upgrade", args))))
        counts = data["counts"]
        print(f"tree: {stats.files} files, {stats.tests} test functions; {changed} changed in {files} files "
              f"({args.changed:.0%}); capture_ops={args.capture_ops} embed={args.embed}; --no-execute")
        print(f"first full run (old tree, cold state): {t_old:7.2f} s")
        print(f"full run (new tree, warm state):       {t_full:7.2f} s   brain asked about {asked_full} tests")
        print(f"upgrade old -> new (warm state):       {t_up:7.2f} s   brain asked about {asked_up} tests")
        print(f"ratio upgrade / full run: {t_up / t_full:.3f} (goal <= 0.15)")
        print(f"delta: {data['evaluated']}; changed {counts['changed']}, added {counts['added']}, "
              f"moved {counts['moved']}, removed {counts['removed']}; LLM calls {data['usage']['calls']} "
              f"(offline brain); brain items only for the delta: {asked_up == counts['evaluated']}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
