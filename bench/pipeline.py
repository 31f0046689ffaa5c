"""Nightly pipeline timings per stage, cold vs warm, side by side in one run.

1. The example (a copy of examples/upstream with examples/backend): a cold run (fresh state
   dir), then a warm rerun over the unchanged tree (same state and output). With execution on
   the curatedev device, op capture on CPU and embeddings, unless switched off.
2. A generated tree (bench/gen_tree.py; default 30 files, 52 tests each), offline brain,
   cold vs warm. Always ``--no-execute``: the generated tests are synthetic bodies that mean
   nothing on a device; op capture is off unless ``--gen-capture-ops``.
3. The LLM brain on the generated tree (``--no-execute --no-embed --no-capture-ops``) against
   a local OpenAI-compatible server started in this process, which answers each batch after
   ``--llm-latency`` seconds (a stand-in for a real model): cold (empty answer cache) vs warm.

Stage seconds come from each run's report.json (``timings_s``); wall is the whole run.

    python bench/pipeline.py [--files 30] [--tests-per-file 52] [--workers 2] [--no-execute]
                             [--no-embed] [--gen-capture-ops] [--llm-latency 0.2] [--skip-example] [--keep DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_tree import generate
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.nightly.run import run_nightly

STAGES = ("scope", "memory", "bucket", "refine", "emit", "verify")
EXAMPLE_TREE = REPO / "examples" / "upstream"
EXAMPLE_BACKEND = REPO / "examples" / "backend" / "backend.yaml"
GEN_BACKEND = """\
schema_version: 1
name: gendev
device: {kind: privateuse1, name: gendev}
hooks: [eager_ops, autograd]
supported_dtypes: [{name: float32}, {name: float16}, {name: bfloat16}, {name: int64}, {name: bool}]
discover_ops: false
"""


# gen_tree writes ``@ops([op for op in op_db if op.name == 'relu'], ...)``; op_db has no
# OpInfo of some of those names, and PyTorch refuses an empty @ops list at collection.
_OPS_LIST = re.compile(r"@ops\(\[op for op in op_db if op\.name == '(\w+)'\]")


def collectable(tree: Path) -> int:
    """Give every empty generated @ops list one OpInfo; returns the files changed."""
    from torch.testing._internal.common_methods_invocations import op_db

    names = {op.name for op in op_db}
    changed = 0
    for path in sorted(tree.rglob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        fixed = _OPS_LIST.sub(lambda m: m.group(0) if m.group(1) in names else "@ops([op for op in op_db if op.name == 'add']", text)
        if fixed != text:
            path.write_text(fixed, encoding="utf-8")
            changed += 1
    return changed


@dataclass
class Result:
    label: str
    wall: float
    timings: dict[str, float]
    tests: int
    usage: dict[str, int] = field(default_factory=dict)
    requests: int = 0  # requests the local LLM server received


def _fake_server(latency: float) -> Any:
    """The answering fake server of the pipeline tests (tests/pipelines/conftest.py)."""
    sys.path.insert(0, str(REPO / "tests" / "agents"))
    spec = importlib.util.spec_from_file_location("pipeline_kit", REPO / "tests" / "pipelines" / "conftest.py")
    assert spec is not None and spec.loader is not None
    kit: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = kit  # dataclasses look their module up there
    spec.loader.exec_module(kit)
    return kit.AnsweringOpenAI(latency=latency).start()


def run(label: str, settings: dict[str, Any], server: Any = None) -> Result:
    before = len(server.requests) if server is not None else 0
    start = time.perf_counter()
    ctx = RunContext.create(**settings)  # a fresh brain per run, as each CLI invocation has
    run_nightly(ctx)
    wall = time.perf_counter() - start
    report = json.loads((ctx.out_dir / "report.json").read_text(encoding="utf-8"))
    requests = len(server.requests) - before if server is not None else 0
    return Result(label, wall, report["timings_s"], sum(report["totals"].values()), report["usage"], requests)


def cold_warm(label: str, base: dict[str, Any], server: Any = None) -> list[Result]:
    cold = run(f"{label} cold", base, server)
    warm = run(f"{label} warm", base, server)
    return [cold, warm]


def print_table(title: str, results: list[Result], llm: bool = False) -> None:
    print(f"\n== {title}")
    head = f"{'run':<24}{'tests':>7}" + "".join(f"{s:>9}" for s in STAGES) + f"{'wall':>9}"
    if llm:
        head += f"{'requests':>10}{'calls':>7}{'cached':>8}{'fallbk':>8}"
    print(head)
    for r in results:
        line = f"{r.label:<24}{r.tests:>7}" + "".join(f"{r.timings.get(s, 0.0):>9.2f}" for s in STAGES) + f"{r.wall:>9.2f}"
        if llm:
            line += f"{r.requests:>10}{r.usage.get('calls', 0):>7}{r.usage.get('cached_items', 0):>8}{r.usage.get('fallbacks', 0):>8}"
        print(line)
    if len(results) == 2 and results[1].wall > 0:
        print(f"cold/warm wall ratio: {results[0].wall / results[1].wall:.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=30, help="generated tree: test files")
    ap.add_argument("--tests-per-file", type=int, default=52)
    ap.add_argument("--workers", type=int, default=2, help="pytest-xdist workers for the example's test runs")
    ap.add_argument("--no-execute", dest="execute", action="store_false", help="example: no device execution")
    ap.add_argument("--no-embed", dest="embed", action="store_false")
    ap.add_argument("--gen-capture-ops", action="store_true", help="generated tree: run its tests on CPU for the op map")
    ap.add_argument("--llm-latency", type=float, default=0.2, help="seconds the local LLM server takes per answer")
    ap.add_argument("--skip-example", action="store_true")
    ap.add_argument("--keep", type=Path, help="work here and keep it (default: a temporary folder)")
    args = ap.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if not args.skip_example:
            tree = work / "example"
            if not tree.exists():
                shutil.copytree(EXAMPLE_TREE, tree, ignore=shutil.ignore_patterns("__pycache__"))
            base = dict(torch_root=tree, backend=EXAMPLE_BACKEND, out_dir=work / "example-out",
                        state_dir=work / "example-state", execute=args.execute, workers=args.workers,
                        embed=args.embed)
            flags = f"{'execute' if args.execute else 'no-execute'}, capture-ops, {'embed' if args.embed else 'no-embed'}, -n {args.workers}"
            print_table(f"example tree ({flags})", cold_warm("example", base))

        gen = work / "generated"
        if not gen.exists():
            stats = generate(gen, files=args.files, tests_per_file=args.tests_per_file)
            (gen / "pytest.ini").write_text("[pytest]\ntestpaths = test\n", encoding="utf-8")
            fixed = collectable(gen)
            print(f"\ngenerated {stats.files} files, {stats.tests} test functions ({fixed} files: empty @ops lists given 'add')")
        backend = work / "gen-backend" / "backend.yaml"
        backend.parent.mkdir(parents=True, exist_ok=True)
        backend.write_text(GEN_BACKEND, encoding="utf-8")
        base = dict(torch_root=gen, backend=backend, out_dir=work / "gen-out", state_dir=work / "gen-state",
                    execute=False, embed=args.embed, capture_ops=args.gen_capture_ops)
        flags = f"no-execute, {'capture-ops' if args.gen_capture_ops else 'no-capture-ops'}, {'embed' if args.embed else 'no-embed'}"
        print_table(f"generated tree, offline brain ({flags})", cold_warm("generated", base))

        server = _fake_server(args.llm_latency)
        try:
            llm = dict(torch_root=gen, backend=backend, out_dir=work / "llm-out", state_dir=work / "llm-state",
                       brain="llm", execute=False, embed=False, capture_ops=False,
                       llm_base_url=server.base_url, llm_model="bench-model")
            print_table(f"generated tree, LLM brain (local server, {args.llm_latency}s per answer; no-execute)",
                        cold_warm("llm", llm, server), llm=True)
        finally:
            server.stop()
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
