"""Collection time with the curate plugin and a config vs plain pytest, same tests.

Generates a device-generic tree on the real torch.testing._internal (>= 20,000
instantiated tests on CPU), then times ``pytest --collect-only`` three ways in one run:
plain (plugin not loaded), plugin loaded but inactive, and plugin applying a config that
uses every feature (modes, edits, capabilities, unlisted defaults). Prints the ratio.
Goal (issue 2): curated / plain <= 1.10.

    python bench/plugin_overhead.py [--files 8] [--tests 25] [--repeat 3]
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

DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool"]


def make_file(index: int, tests: int, params: int) -> str:
    dtypes = ", ".join(f"torch.{d}" for d in DTYPES)
    body = [
        "import torch",
        "from torch.testing._internal.common_utils import TestCase, parametrize",
        "from torch.testing._internal.common_device_type import instantiate_device_type_tests, dtypes",
        "",
        f"class TestGen{index}(TestCase):",
    ]
    for t in range(tests):
        body += [
            f"    @parametrize('n', list(range({params})))",
            f"    @dtypes({dtypes})",
            f"    def test_case_{t}(self, device, dtype, n):",
            "        pass",
            "",
        ]
    body.append(f"instantiate_device_type_tests(TestGen{index}, globals(), only_for='cpu')")
    return "\n".join(body) + "\n"


def make_config(files: int, tests: int) -> str:
    lines = [
        "test_suite_config:",
        "  global:",
        "    supported_dtypes: [{name: float32}, {name: float16}, {name: bfloat16}, {name: int64}, {name: bool}]",
        "  files:",
    ]
    for f in range(files):
        lines += [f"    - path: ${{TORCH_ROOT}}/test/test_gen_{f}.py", "      unlisted_test_mode: xfail", "      tests:"]
        for t in range(0, tests, 2):
            mode = ("mandatory_success", "skip", "xfail_strict")[t % 3]
            lines += [f"        # generated entry {t}", f"        - names: [TestGen{f}::test_case_{t}]", f"          mode: {mode}"]
            if t % 4 == 0:
                lines += ["          edits:", "            dtypes:", "              exclude: [{name: bool}]"]
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
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--tests", type=int, default=25)
    parser.add_argument("--params", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tc-bench-") as tmp:
        root = Path(tmp)
        (root / "test").mkdir()
        for f in range(args.files):
            (root / "test" / f"test_gen_{f}.py").write_text(make_file(f, args.tests, args.params))
        (root / "curate.yaml").write_text(make_config(args.files, args.tests))
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
                counts[name] = next((line for line in out.splitlines() if "collected" in line or "tests collected" in line), out.splitlines()[-1])
        print(f"tree: {args.files} files x {args.tests} tests x {len(DTYPES)} dtypes x {args.params} params")
        for name in variants:
            print(f"{name:28s} CPU median {statistics.median(cpus[name]):6.2f} s  wall median {statistics.median(times[name]):6.2f} s"
                  f"  CPU runs {[round(t, 2) for t in cpus[name]]}  [{counts[name].strip()}]")
        base = statistics.median(cpus["plain (plugin not loaded)"])
        print(f"CPU ratio plugin+config / plain: {statistics.median(cpus['plugin + config']) / base:.3f} (goal <= 1.10)")
        print(f"CPU ratio plugin loaded / plain: {statistics.median(cpus['plugin loaded, no config']) / base:.3f}")


if __name__ == "__main__":
    main()
