"""Generate a synthetic PyTorch-style test tree for the memory benchmarks.

Deterministic (seeded). Each file mixes what upstream test files contain: device-generic
classes with ``@dtypes`` (single, per-device ``@dtypesIfCUDA``, and dtype pairs
``@dtypes(*product(...))``) / ``@parametrize`` / ``@ops`` over the real ``op_db``, skip decorators, a mixin whose tests
are inherited, ``instantiate_parametrized_tests`` classes, docstrings, module-level tests.
Every test body holds a unique ``seed = N`` line so a benchmark can change chosen tests.

    python bench/gen_tree.py OUT [--files 1000] [--tests-per-file 52] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import re
from dataclasses import dataclass
from pathlib import Path

HEADER = """\
from itertools import product

import torch
import torch.nn.functional as F
from torch.testing._internal.common_utils import (
    TestCase, run_tests, parametrize, instantiate_parametrized_tests, skipIfTorchDynamo)
from torch.testing._internal.common_device_type import (
    instantiate_device_type_tests, dtypes, dtypesIfCUDA, onlyCPU, onlyCUDA, ops, skipMeta)
from torch.testing._internal.common_methods_invocations import op_db

"""
# What one instance of a real upstream test costs on CPU (seconds), as quantiles: 731
# instances of 11 real upstream PyTorch test files (test_shape_ops, test_view_ops,
# test_segment_reductions, test_complex, test_sort_and_select, test_dlpack, test_indexing,
# test_type_info, test_numpy_interop, test_subclass, test_type_promotion), timed by the CPU
# op capture on 2 cores, torch 2.13.0. Median 14 ms, mean 127 ms: most instances are cheap,
# a tail of a few percent costs seconds each (OpInfo and numerical-gradient tests).
REAL_COST_QUANTILES = ((0.0, 0.002), (0.1, 0.0045), (0.25, 0.008), (0.5, 0.0136), (0.75, 0.0264), (0.9, 0.119),
                       (0.95, 0.509), (0.99, 2.357), (1.0, 7.6))
BURN = """
import time as _time


def _burn(seconds):
    # CPU time, not sleep: a real test's cost competes for the cores like this does.
    end = _time.process_time() + seconds
    while _time.process_time() < end:
        pass

"""
OPS = ["add", "mul", "sub", "matmul", "sum", "mean", "softmax", "relu", "abs", "exp", "log", "sin", "cat",
       "stack", "where", "clamp", "sort", "topk", "cumsum", "var", "std", "max", "min", "prod", "tanh"]
DTYPES = ["torch.float32", "torch.float64", "torch.float16", "torch.bfloat16", "torch.int32", "torch.int64",
          "torch.bool", "torch.complex64"]
WORDS = ["broadcast", "contiguous", "stride", "inplace", "out", "grad", "empty", "large", "scalar", "noncontig",
         "batched", "sparse", "view", "alias", "overlap", "nan", "inf", "zero_dim", "dim", "keepdim"]
SEED_RE = re.compile(r"seed = (\d+)\n")


@dataclass(frozen=True)
class GenStats:
    files: int
    tests: int  # test function definitions written (inherited copies not counted)
    bytes: int


def _body(rng: random.Random, uid: int, device: bool) -> list[str]:
    op = rng.choice(OPS)
    dev = "device=device" if device else "device='cpu'"
    lines = [f"seed = {uid}", f"x = torch.randn({rng.randint(1, 9)}, {rng.randint(1, 9)}, {dev})"]
    for _ in range(rng.randint(2, 9)):
        op2 = rng.choice(OPS)
        lines.append(rng.choice([
            f"y = torch.{op2}(x, x) if hasattr(torch, '{op2}') else x",
            f"y = F.relu(x).{op2}() if x.numel() else x",
            f"self.assertEqual(torch.{op}(x).shape, x.shape)",
            f"for i in range({rng.randint(1, 4)}):\n            x = x.clone().{op2}() if i else x",
            "z = torch.zeros_like(x); self.assertTrue((z == 0).all())",
        ]))
    return lines


def real_cost(rng: random.Random) -> float:
    """One draw from :data:`REAL_COST_QUANTILES` (linear between the quantiles)."""
    u = rng.random()
    for (p0, v0), (p1, v1) in zip(REAL_COST_QUANTILES, REAL_COST_QUANTILES[1:]):
        if u <= p1:
            return v0 + (v1 - v0) * (u - p0) / (p1 - p0)
    return REAL_COST_QUANTILES[-1][1]


def _test(rng: random.Random, uid: int, name: str, kind: str, cost: float | None = None) -> str:
    decos: list[str] = []
    params = ["self"]
    if kind == "device":
        params.append("device")
        roll = rng.random()
        if roll < 0.15:
            decos.append(f"@ops([op for op in op_db if op.name == '{rng.choice(OPS)}'], "
                         f"allowed_dtypes=({rng.choice(DTYPES)},))")
            params += ["dtype", "op"]
        elif roll < 0.65:
            decos.append(f"@dtypes({', '.join(rng.sample(DTYPES, rng.randint(1, 4)))})")
            params.append("dtype")
            if rng.random() < 0.2:  # a per-device list, as upstream writes for CUDA
                decos.insert(0, f"@dtypesIfCUDA({', '.join(rng.sample(DTYPES, rng.randint(1, 4)))})")
        elif roll < 0.75:  # dtype pairs: PyTorch passes them as the tuple parameter "dtypes"
            firsts, seconds = rng.sample(DTYPES, 2), rng.sample(DTYPES, rng.randint(1, 3))
            decos.append(f"@dtypes(*product(({', '.join(firsts)}), ({', '.join(seconds)},)))")
            params.append("dtypes")
        if rng.random() < 0.2:
            decos.insert(0, f"@parametrize(\"n\", [{', '.join(str(i) for i in range(rng.randint(1, 4)))}])")
            params.append("n")
        if rng.random() < 0.1:
            decos.insert(0, rng.choice(["@onlyCPU", "@onlyCUDA", "@skipMeta"]))
    elif kind == "param":
        decos.append(f"@parametrize(\"k\", range({rng.randint(1, 5)}))")
        params.append("k")
    if rng.random() < 0.05:
        decos.insert(0, "@skipIfTorchDynamo(\"flaky under dynamo\")")
    lines = [f"    {d}" for d in decos] + [f"    def {name}({', '.join(params)}):"]
    if rng.random() < 0.3:
        lines.append(f'        """Check {" ".join(rng.sample(WORDS, 3))} behaviour of {rng.choice(OPS)}."""')
    body = _body(rng, uid, kind == "device")
    if cost is not None:  # every instance of the test burns it
        body.insert(1, f"_burn({cost:.4f})")
    lines += [f"        {b}" for b in body]
    return "\n".join(lines) + "\n"


def _file(rng: random.Random, stem: str, n_tests: int, uid: int,
          costs: random.Random | None = None) -> tuple[str, int]:
    out = [HEADER + (BURN if costs is not None else "")]
    written = 0
    classes = [("mixin", max(1, n_tests // 10)), ("device", n_tests // 2), ("param", n_tests // 10)]
    classes.append(("plain", n_tests - sum(n for _, n in classes) - 2))
    for kind, count in classes:
        cls = {"mixin": f"_{stem}Checks", "device": f"Test{stem}Device", "param": f"Test{stem}Param",
               "plain": f"Test{stem}"}[kind]
        base = {"mixin": "", "plain": f"(_{stem}Checks, TestCase)"}.get(kind, "(TestCase)")
        if kind == "param":
            out.append("@instantiate_parametrized_tests\n")
        out.append(f"class {cls}{base}:\n")
        used: set[str] = set()
        for _ in range(count):
            name = f"test_{rng.choice(OPS)}_{rng.choice(WORDS)}_{len(used)}"
            used.add(name)
            out.append(_test(rng, uid + written, name, kind, real_cost(costs) if costs is not None else None) + "\n")
            written += 1
        if kind == "device":
            out.append(f"\ninstantiate_device_type_tests({cls}, globals())\n\n")
    for i in range(2):
        out.append(f"def test_module_{stem.lower()}_{i}():\n    seed = {uid + written}\n    assert torch.ones(1).sum() == 1\n\n")
        written += 1
    out.append('\nif __name__ == "__main__":\n    run_tests()\n')
    return "".join(out), written


def generate(root: Path, files: int = 1000, tests_per_file: int = 52, seed: int = 0,
             real_costs: bool = False) -> GenStats:
    """Write ``files`` test files under ``root/test`` (spread over sub-folders); with
    ``real_costs`` every test burns CPU drawn from :data:`REAL_COST_QUANTILES` (its own
    random stream: the tree is otherwise the same)."""
    rng = random.Random(seed)
    costs = random.Random(seed + 1) if real_costs else None
    total_tests = total_bytes = 0
    for i in range(files):
        folder = root / "test" / (f"area{i % 20}" if i % 3 else "")
        folder.mkdir(parents=True, exist_ok=True)
        text, n = _file(rng, f"Gen{i}", tests_per_file, total_tests, costs)
        (folder / f"test_gen_{i}.py").write_text(text)
        total_tests += n
        total_bytes += len(text.encode())
    return GenStats(files, total_tests, total_bytes)


def touch_tests(root: Path, fraction: float, seed: int = 1) -> tuple[int, int]:
    """Change the body of ``fraction`` of all tests (random ones); returns (tests, files) changed."""
    files = sorted(root.rglob("test_*.py"))
    seeds = [(path, int(m.group(1))) for path in files for m in SEED_RE.finditer(path.read_text())]
    chosen = random.Random(seed).sample(seeds, max(1, int(len(seeds) * fraction)))
    by_file: dict[Path, set[int]] = {}
    for path, uid in chosen:
        by_file.setdefault(path, set()).add(uid)
    for path, uids in by_file.items():
        text = SEED_RE.sub(lambda m: f"seed = {m.group(1)} + 1\n" if int(m.group(1)) in uids else m.group(0),
                           path.read_text())
        path.write_text(text)
    return len(chosen), len(by_file)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--tests-per-file", type=int, default=52)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    stats = generate(args.out, args.files, args.tests_per_file, args.seed)
    print(f"wrote {stats.files} files, {stats.tests} test functions, {stats.bytes / 1e6:.1f} MB under {args.out}")


if __name__ == "__main__":
    main()
