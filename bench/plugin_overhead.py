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
"""

from __future__ import annotations

import argparse
import resource
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


def collect(root: Path, extra: list[str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the child, stdout) of one collect-only run.

    CPU time is the figure compared: wall time swings with whatever else the 2 cores run.
    """
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "test", *extra]
    cpu0, start = _children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - start, _children_cpu() - cpu0
    if proc.returncode != 0:
        raise SystemExit(f"collection failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return elapsed, cpu, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=4, help="@ops(op_db) tests (about 6,000 instances each)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tc-bench-") as tmp:
        root = Path(tmp)
        (root / "test").mkdir()
        (root / "test" / "test_opdb.py").write_text(make_file(args.copies))
        (root / "curate.yaml").write_text(make_config(args.copies))
        variants = {
            "plain (plugin not loaded)": ["-p", "no:testcurator"],
            "plugin loaded, no config": [],
            "plugin + config": ["--curate-config", "curate.yaml", "--curate-torch-root", str(root)],
        }
        times: dict[str, list[float]] = {k: [] for k in variants}
        cpus: dict[str, list[float]] = {k: [] for k in variants}
        counts: dict[str, str] = {}
        for _ in range(args.repeat):  # interleaved, so drift hits every variant alike
            for name, extra in variants.items():
                elapsed, cpu, out = collect(root, extra)
                times[name].append(elapsed)
                cpus[name].append(cpu)
                counts[name] = next((line for line in out.splitlines() if "collected" in line), out.splitlines()[-1])
                collected = int(counts[name].split()[0])
                if collected < 20_000:
                    raise SystemExit(f"only {collected} instances collected; the benchmark needs >= 20,000 (raise --copies)")
        print(f"file: {args.copies} x @ops(op_db) + @ops(python_ref_db) + @modules(module_db) + dtype pairs, "
              f"{collected} instances on CPU (real OpInfo/ModuleInfo objects)")
        for name in variants:
            print(f"{name:28s} CPU median {statistics.median(cpus[name]):6.2f} s  wall median {statistics.median(times[name]):6.2f} s"
                  f"  CPU runs {[round(t, 2) for t in cpus[name]]}  [{counts[name].strip()}]")
        base = statistics.median(cpus["plain (plugin not loaded)"])
        print(f"CPU ratio plugin+config / plain: {statistics.median(cpus['plugin + config']) / base:.3f} (goal <= 1.10)")
        # On a shared machine the best run of each is the least disturbed one.
        print(f"CPU ratio plugin+config / plain, best runs: "
              f"{min(cpus['plugin + config']) / min(cpus['plain (plugin not loaded)']):.3f}")
        print(f"CPU ratio plugin loaded / plain: {statistics.median(cpus['plugin loaded, no config']) / base:.3f}")


if __name__ == "__main__":
    main()
