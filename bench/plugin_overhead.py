"""Collection time with the curate plugin and a config vs plain pytest, same tests.

Writes a device-generic test file over the REAL ``op_db``, ``python_ref_db`` and
``module_db`` of the installed torch (``@ops(op_db)`` as upstream's test_ops.py and
test_unary_ufuncs.py use it: >= 20,000 instances on CPU, every one carrying a real
OpInfo or ModuleInfo), plus dtype pairs (``@dtypes(*product(...))``) and ``@parametrize``.
Then times ``pytest --collect-only`` three ways in one run, interleaved: plain (plugin not
loaded), plugin loaded but inactive, and plugin applying a config that uses every feature
(modes, op/dtype/module edits, supported_dtypes and supported_ops, unlisted defaults).
Prints the CPU-time ratio. Goal (issues 2 and 9): curated / plain <= 1.10.

A benchmark on stand-in objects hid a 2.3x cost once: the identity code rendered each real
OpInfo with ``str()`` (a pretty-printed dump of the whole record) and the stand-ins had none.

    python bench/plugin_overhead.py [--copies 4] [--repeat 3]

A real upstream file with a real imported skip list (issue 36: goal <= 1.05): the file is
copied into a tree of its own as ``test/<name>``, the skip list goes through ``testcurator
import skiplist`` (an intel/torch-xpu-ops ``skip_dict``; ``--as-device`` names the device its
patterns were written for), and the config it writes is the one applied. ``--config`` takes an
already imported config instead. ``--baseline-python`` times the plugin under another
interpreter too (a venv with an earlier testcurator installed), in the same interleaved runs:
before and after, side by side.

    python bench/plugin_overhead.py --file ~/pytorch/test/test_unary_ufuncs.py \
        --skip-list skip_list_win.py [--as-device xpu] [--repeat 5] [--baseline-python OLD/bin/python]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEADER = """\
from itertools import product

import torch
from torch.testing._internal.common_utils import TestCase, parametrize
from torch.testing._internal.common_device_type import OpDTypes, dtypes, instantiate_device_type_tests, ops
from torch.testing._internal.common_methods_invocations import op_db, python_ref_db
from torch.testing._internal.common_modules import module_db, modules


class TestOpDb(TestCase):
"""
TESTS = """\
    @ops(op_db)
    def test_op_{n}(self, device, dtype, op):
        pass

"""
TAIL = """\
    @ops(python_ref_db, dtypes=OpDTypes.any_one)
    def test_ref(self, device, dtype, op):
        pass

    @modules(module_db)
    def test_module(self, device, dtype, module_info, training):
        pass

    @parametrize("reduce", ["sum", "amax", "mean"])
    @dtypes(*product((torch.float32, torch.float64, torch.complex64), (torch.int32, torch.int64)))
    def test_pair(self, device, dtypes, reduce):
        pass


instantiate_device_type_tests(TestOpDb, globals(), only_for="cpu")
"""
SUPPORTED_OPS = ["add", "sub", "mul", "div", "abs", "exp", "log", "sin", "cos", "matmul", "sum", "mean", "max", "min",
                 "nn.functional.relu", "nn.functional.conv2d", "cat", "stack", "where", "clamp", "sort", "topk",
                 "_refs.abs", "_refs.add", "special.erfcx", "linalg.det", "fft.fft", "masked.sum", "cumsum", "var"]


def make_file(copies: int) -> str:
    return HEADER + "".join(TESTS.format(n=n) for n in range(copies)) + TAIL


def make_config(copies: int) -> str:
    ops = ", ".join(f"{{name: {o}}}" for o in SUPPORTED_OPS)
    lines = [
        "test_suite_config:",
        "  global:",
        "    supported_dtypes: [{name: float32}, {name: float16}, {name: bfloat16}, {name: int64}, {name: int32},"
        " {name: bool}]",
        "  files:",
        "    - path: ${TORCH_ROOT}/test/test_opdb.py",
        "      unlisted_test_mode: xfail",
        "      global:",
        f"        supported_ops: [{ops}, {{name: nn.functional.softmax, dtypes: [{{name: float32}}]}}]",
        "      tests:",
    ]
    for n in range(copies):
        mode = ("mandatory_success", "xfail_strict", "skip")[n % 3]
        lines += [f"        # Generated entry {n}: TestOpDbCPU::test_op_{n}_nn_functional_conv2d_cpu_float32 and its",
                  "        # siblings, to give the reason comment a realistic length.",
                  f"        - names: [TestOpDb::test_op_{n}]", f"          mode: {mode}",
                  "          edits:", "            ops:", "              exclude: [{name: div}, {name: sum, dtypes: "
                  "[{name: int64}]}]", "            dtypes:", "              exclude: [{name: bool}]"]
    lines += ["        - names: [TestOpDb::test_module]", "          mode: mandatory_success", "          edits:",
              "            modules:", "              exclude: [{name: nn.Linear}]",
              "        - names: [TestOpDb::test_pair]", "          mode: mandatory_success", "          edits:",
              "            dtypes:", "              exclude: [{name: int32}]"]
    return "\n".join(lines) + "\n"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def collect(root: Path, extra: list[str], python: str = sys.executable) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the child, stdout) of one collect-only run.

    CPU time is the figure compared: wall time swings with whatever else the 2 cores run.
    """
    cmd = [python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "test", *extra]
    cpu0, start = _children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - start, _children_cpu() - cpu0
    if proc.returncode != 0:
        raise SystemExit(f"collection failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return elapsed, cpu, proc.stdout


PLAIN, LOADED, CURATED, BASELINE = ("plain (plugin not loaded)", "plugin loaded, no config", "plugin + config",
                                    "plugin + config (baseline)")


def synthetic_tree(root: Path, copies: int) -> tuple[Path, str]:
    """The generated file over op_db, and its config; a description for the report."""
    (root / "test").mkdir()
    (root / "test" / "test_opdb.py").write_text(make_file(copies))
    (root / "curate.yaml").write_text(make_config(copies))
    return root / "curate.yaml", (f"file: {copies} x @ops(op_db) + @ops(python_ref_db) + @modules(module_db) + "
                                  "dtype pairs")


def real_tree(root: Path, file: Path, skip_list: Path | None, config: Path | None, as_device: str) -> tuple[Path, str]:
    """``file`` copied to ``root/test``, and the config a real skip list imports for it."""
    (root / "test").mkdir()
    shutil.copyfile(file, root / "test" / file.name)
    if config is not None:
        return config.resolve(), f"file: {file} (real), config {config}"
    assert skip_list is not None
    out = root / "imported"
    cmd = [str(Path(sys.executable).with_name("testcurator")), "import", "skiplist", str(skip_list), "--torch-root",
           str(root), "--out", str(out), "--as-device", as_device, "--max-unplaced", "100%"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    configs = sorted(out.glob("*.yaml")) if out.is_dir() else []
    if proc.returncode != 0 or len(configs) != 1:
        raise SystemExit(f"import of {skip_list} gave {len(configs)} config(s) (exit {proc.returncode}):\n"
                         f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    summary = next((line for line in reversed(proc.stdout.splitlines()) if "pattern(s) in files of the tree" in line),
                   "")
    return configs[0], f"file: {file} (real), skip list {skip_list} imported: {summary}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=4, help="@ops(op_db) tests (about 6,000 instances each)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--file", type=Path, help="a real upstream test file instead of the generated one")
    parser.add_argument("--skip-list", type=Path, help="a skip list for --file, imported with `testcurator import`")
    parser.add_argument("--config", type=Path, help="a config for --file (instead of --skip-list)")
    parser.add_argument("--as-device", default="xpu", help="the device the skip list's patterns name")
    parser.add_argument("--baseline-python", help="also time the plugin under this interpreter (another install)")
    args = parser.parse_args()
    if args.file is not None and (args.skip_list is None) == (args.config is None):
        parser.error("--file needs --skip-list or --config")
    goal = 1.05 if args.file is not None else 1.10
    with tempfile.TemporaryDirectory(prefix="tc-bench-") as tmp:
        root = Path(tmp)
        if args.file is not None:
            config, what = real_tree(root, args.file.resolve(), args.skip_list, args.config, args.as_device)
            minimum = 1
        else:
            config, what = synthetic_tree(root, args.copies)
            minimum = 20_000
        curated = ["--curate-config", str(config), "--curate-torch-root", str(root)]
        variants: dict[str, tuple[list[str], str]] = {
            PLAIN: (["-p", "no:testcurator"], sys.executable),
            LOADED: ([], sys.executable),
            CURATED: (curated, sys.executable),
        }
        if args.baseline_python:
            variants[BASELINE] = (curated, args.baseline_python)
        times: dict[str, list[float]] = {k: [] for k in variants}
        cpus: dict[str, list[float]] = {k: [] for k in variants}
        counts: dict[str, str] = {}
        for _ in range(args.repeat):  # interleaved, so drift hits every variant alike
            for name, (extra, python) in variants.items():
                elapsed, cpu, out = collect(root, extra, python)
                times[name].append(elapsed)
                cpus[name].append(cpu)
                counts[name] = next((line for line in out.splitlines() if "collected" in line), out.splitlines()[-1])
                collected = int(counts[name].split()[0])
                if collected < minimum:
                    raise SystemExit(f"only {collected} instances collected; the benchmark needs >= {minimum:,} "
                                     "(raise --copies)")
        print(f"{what}; {collected} instances on CPU (real OpInfo/ModuleInfo objects)")
        for name in variants:
            print(f"{name:28s} CPU median {statistics.median(cpus[name]):6.2f} s  wall median "
                  f"{statistics.median(times[name]):6.2f} s  CPU runs {[round(t, 2) for t in cpus[name]]}  "
                  f"[{counts[name].strip()}]")
        base, best = statistics.median(cpus[PLAIN]), min(cpus[PLAIN])
        for name in (CURATED, BASELINE):
            if name in cpus:
                print(f"CPU ratio {name} / plain: {statistics.median(cpus[name]) / base:.3f} (goal <= {goal:.2f}); "
                      f"best runs: {min(cpus[name]) / best:.3f}")  # on a shared machine the least disturbed
        print(f"CPU ratio plugin loaded / plain: {statistics.median(cpus[LOADED]) / base:.3f}")


if __name__ == "__main__":
    main()
