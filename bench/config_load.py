"""Loading a PyTorch-size config: ``validate`` and the plugin's load against PyYAML's C loader.

Generates a config of ``--entries`` test entries (default 50,000: 100 upstream files of 500
entries, a reason comment above every entry as the pipeline writes them, every tenth
entry with edits, every fifth with two names) and the upstream files it names, then times,
side by side and interleaved, each in a fresh process (imports done before the clock
starts, torch included, as inside pytest):

- ``c-loader``: ``yaml.load(text, Loader=yaml.CSafeLoader)``, PyYAML's C loader alone
  (the baseline of the goal: validate and the plugin's load <= 1.5x of it);
- ``c-loader-nogc``: the same with the cyclic GC paused (the floor of any loader that
  builds Python objects for every node);
- ``validate``: :func:`testcurator.config.loader.validate`, what ``testcurator validate``
  runs (schema, positions, paths, duplicate names, reasons);
- ``plugin-load``: :func:`testcurator.config.loader.load_config` with a torch root, which
  is what the pytest plugin's ``pytest_configure`` calls (``plugin/entry.py``);
- ``ruamel`` (``--with-ruamel``): ruamel.yaml's round-trip load alone, the old path.

Prints median and best seconds, the ratio to ``c-loader`` and the peak memory the step
added (max RSS after minus RSS before). Then ``testcurator validate`` end to end through
the installed entry point (wall time, imports included).

    python bench/config_load.py [--entries 50000] [--repeat 3] [--with-ruamel] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PER_FILE = 500
MODES = ("mandatory_success", "xfail", "xfail_strict", "skip")
CLASSES = ("TestBinaryUfuncs", "TestCommon", "TestViewOps", "TestTensorCreation", "TestReductions")


def make_config(entries: int) -> tuple[str, int]:
    """The config text and the number of upstream files it names."""
    files = max(1, entries // PER_FILE)
    lines = ["test_suite_config:", "  schema_version: 1", "  labels: [trunk, nightly]", "  global:",
             "    supported_dtypes: [{name: float32}, {name: bfloat16}, {name: float16}, {name: int64}]",
             "    supported_ops:", "      - name: _scaled_mm", "        dtypes: [{name: bfloat16}]", "  files:"]
    for f in range(files):
        lines += [f"    - path: ${{TORCH_ROOT}}/test/test_generated_{f}.py", "      unlisted_test_mode: skip", "      tests:"]
        for t in range(PER_FILE):
            cls = CLASSES[t % len(CLASSES)]
            names = [f"{cls}::test_case_{t}_with_a_long_descriptive_name"]
            if t % 5 == 0:
                names.append(f"{cls}::test_case_{t}_variant")
            lines.append(f"        # Decided by the offline brain: {MODES[t % 4]} because the run on the device ended so"
                         f" (evidence: run-0 line {t}).")
            lines.append(f"        - names: [{', '.join(names)}]")
            lines.append(f"          mode: {MODES[t % 4]}")
            if t % 10 == 0:
                lines += ["          edits:", "            dtypes:", "              exclude: [{name: bool}, {name: int8}]",
                          "            ops:", "              exclude: [{name: sub}]"]
    return "\n".join(lines) + "\n", files


def make_inputs(entries: int, where: Path) -> tuple[Path, Path]:
    config, files = make_config(entries)
    root = where / "torch"
    (root / "test").mkdir(parents=True)
    for f in range(files):
        (root / "test" / f"test_generated_{f}.py").write_text("def test_x():\n    pass\n")
    path = where / "config.yaml"
    path.write_text(config)
    return path, root


# --- one measurement, in a child process ------------------------------------------------------
def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(variant: str, config: Path, root: Path) -> dict[str, float]:
    import gc

    import torch  # noqa: F401  (inside pytest torch is imported already; validate needs its dtypes)
    import yaml

    from testcurator.config.loader import load_config, validate
    from testcurator.installed import dtype_names

    dtype_names()
    text = config.read_text()
    steps = {
        "c-loader": lambda: yaml.load(text, Loader=yaml.CSafeLoader),
        "c-loader-nogc": lambda: yaml.load(text, Loader=yaml.CSafeLoader),
        "validate": lambda: _check(validate([config], torch_root=root)),
        "plugin-load": lambda: load_config(config, torch_root=root),
        "ruamel": lambda: _ruamel(text),
    }
    before = _rss_mb()
    if variant == "c-loader-nogc":
        gc.disable()
    start = time.perf_counter()
    steps[variant]()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "peak_added_mb": max(peak - before, 0.0)}


def _check(problems: list[object]) -> None:
    if problems:
        raise SystemExit(f"the generated config should be valid: {problems[:3]}")


def _ruamel(text: str) -> object:
    from ruamel.yaml import YAML

    return YAML(typ="rt").load(text)


def measure(variant: str, config: Path, root: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--child", variant, "--config", str(config), "--root", str(root)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def end_to_end(config: Path, root: Path) -> float:
    exe = Path(sys.executable).with_name("testcurator")
    start = time.perf_counter()
    proc = subprocess.run([str(exe), "validate", str(config), "--torch-root", str(root)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"testcurator validate failed: {proc.stderr[-2000:]}")
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--with-ruamel", action="store_true")
    ap.add_argument("--keep", type=Path, help="generate into this folder and keep it")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--config", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.config, args.root)))
        return
    where = args.keep or Path(tempfile.mkdtemp(prefix="bench-config-"))
    try:
        config, root = make_inputs(args.entries, where)
        size = config.stat().st_size / 2**20
        print(f"config: {args.entries} entries, {size:.1f} MB, {config.read_text().count(chr(10))} lines")
        variants = ["c-loader", "c-loader-nogc", "validate", "plugin-load"]
        results: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
        for _ in range(args.repeat):  # interleaved, so that machine load hits every variant alike
            for variant in variants:
                results[variant].append(measure(variant, config, root))
        if args.with_ruamel:
            results["ruamel"] = [measure("ruamel", config, root)]
        base = statistics.median(r["seconds"] for r in results["c-loader"])
        print(f"{'step':<15}{'median s':>10}{'best s':>9}{'x c-loader':>12}{'peak +MB':>10}")
        for variant, runs in results.items():
            secs = [r["seconds"] for r in runs]
            med = statistics.median(secs)
            mem = max(r["peak_added_mb"] for r in runs)
            print(f"{variant:<15}{med:>10.2f}{min(secs):>9.2f}{med / base:>12.2f}{mem:>10.0f}")
        print("goal: validate and plugin-load <= 1.50x c-loader")
        print(f"testcurator validate end to end (installed entry point, imports included): {end_to_end(config, root):.2f} s")
    finally:
        if args.keep is None:
            shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
