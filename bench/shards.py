"""Shard balance and planning time on a PyTorch-size selection (issue 11).

Generates 200,000 instance node ids over 1,000 files in PyTorch's areas (eager ops,
autograd, inductor, distributed, nn, ...), named like PyTorch's instantiated tests from
the real ``op_db`` (``TestCommonCPU::test_compare_cpu_nn_functional_relu_cpu_float32``),
with a long-tailed duration distribution: per-file scale (inductor and distributed files
are slower) times a lognormal per test, with 3% of tests from a slow lognormal (seconds
to minutes), the shape of PyTorch's own test-times. 15% of the instances are skipped by
the config (cost nothing).

Then splits them into 64 shards exactly as ``--curate-shard`` does at collection
(``testcurator.sharding.split``: pytest-split's least_duration + estimates + free skips)
and prints: planning time (wall and CPU: the machine may be shared), slowest shard /
ideal (ideal = total / 64), pytest-split's own implementation side by side (same shards,
its time), the same with 10%
of durations unknown (estimated from the file median; measured against the true
durations), determinism under a shuffled collection order, and the three-level plan
(feature groups, --max-job-s 1800).

    .venv/bin/python bench/shards.py [--instances 200000] [--shards 64] [--files 1000]
Goal: slowest <= 1.10 x ideal, planning < 5 s.
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter

from testcurator.pipelines.shard_plan import plan_jobs
from testcurator.sharding import estimate, least_duration, split

AREAS = [  # (folder, file stem prefix, share of files, duration scale in s)
    ("test", "test_ops", 0.20, 0.08), ("test", "test_torch", 0.10, 0.05), ("test", "test_nn", 0.10, 0.1),
    ("test", "test_autograd", 0.08, 0.05), ("test/inductor", "test_inductor", 0.15, 1.5),
    ("test/distributed", "test_c10d", 0.07, 2.0), ("test", "test_linalg", 0.05, 0.1),
    ("test/dynamo", "test_compile", 0.10, 0.8), ("test", "test_sparse", 0.05, 0.1),
    ("test/quantization", "test_quantized", 0.05, 0.2), ("test", "test_misc", 0.05, 0.02),
]
DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "bool", "complex64"]


def op_names() -> list[str]:
    from torch.testing._internal.common_methods_invocations import op_db

    return sorted({o.formatted_name for o in op_db})


def generate(instances: int, files: int, seed: int) -> tuple[list[str], dict[str, float], set[str], list[str]]:
    rng = random.Random(seed)
    ops = op_names()
    paths, scales = [], []
    for folder, stem, share, scale in AREAS:
        for i in range(max(1, round(files * share))):
            paths.append(f"{folder}/{stem}_{i}.py")
            scales.append(scale * rng.lognormvariate(0, 0.7))
    nodeids, durations = [], {}
    for n in range(instances):
        f = rng.randrange(len(paths))
        op, dtype = ops[rng.randrange(len(ops))], DTYPES[rng.randrange(len(DTYPES))]
        nodeid = f"{paths[f]}::TestCommonCPU::test_t{n % 50}_{op}_cpu_{dtype}_{n}"
        slow = rng.random() < 0.03
        seconds = rng.lognormvariate(1.0, 1.2) if slow else scales[f] * rng.lognormvariate(0, 1.0)
        nodeids.append(nodeid)
        durations[nodeid] = min(seconds, 900.0)
    skipped = {n for n in nodeids if rng.random() < 0.15}
    return nodeids, durations, skipped, paths


def measure(nodeids: list[str], known: dict[str, float], truth: dict[str, float], skipped: set[str],
            shards: int) -> dict[str, float]:
    start, cpu = time.perf_counter(), time.process_time()
    plan = split(nodeids, known, shards, skipped)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    planned = [s.expected_s for s in plan]
    actual = [sum(truth[n] for n in s.nodeids if n not in skipped) for s in plan]
    expected = estimate([n for n in nodeids if n not in skipped], known)
    return {
        "plan_s": seconds, "plan_cpu_s": cpu, "planned_ratio": max(planned) / (sum(expected.values()) / shards),
        "actual_ratio": max(actual) / (sum(actual) / shards), "min_runnable": min(s.runnable for s in plan),
        "max_test_s": max(truth[n] for n in nodeids if n not in skipped), "ideal_s": sum(actual) / shards,
    }


def compare_pytest_split(runnable: list[str], durations: dict[str, float], shards: int) -> None:
    """pytest-split's own least_duration on the same tests, side by side (when installed)."""
    try:
        from pytest_split.algorithms import Algorithms
    except ImportError:
        print("pytest-split not installed: no side-by-side figure")
        return

    class Item(str):
        @property
        def nodeid(self) -> str:
            return str.__str__(self)

    items = [Item(n) for n in runnable]
    start, cpu = time.perf_counter(), time.process_time()
    theirs = Algorithms.least_duration.value(shards, items, durations)
    theirs_s, theirs_cpu = time.perf_counter() - start, time.process_time() - cpu
    start, cpu = time.perf_counter(), time.process_time()
    ours, _ = least_duration(runnable, durations, shards)
    ours_s, ours_cpu = time.perf_counter() - start, time.process_time() - cpu
    same = [sorted(runnable[i] for i in g) for g in ours] == [sorted(map(str, g.selected)) for g in theirs]
    print(f"least_duration alone: pytest-split {theirs_s:.2f} s ({theirs_cpu:.2f} s CPU), ours {ours_s:.2f} s "
          f"({ours_cpu:.2f} s CPU), ratio {theirs_cpu / ours_cpu:.1f}x; same shards: {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=200_000)
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    nodeids, truth, skipped, paths = generate(args.instances, args.files, args.seed)
    runnable = [truth[n] for n in nodeids if n not in skipped]
    print(f"{len(nodeids):,} instances in {len(paths):,} files; {len(skipped):,} skipped by the config; "
          f"{sum(runnable) / 3600:.1f} h to run; median {sorted(runnable)[len(runnable) // 2]:.3f} s, "
          f"slowest {max(runnable):.0f} s")
    full = measure(nodeids, truth, truth, skipped, args.shards)
    print(f"all durations known:  plan {full['plan_s']:.2f} s ({full['plan_cpu_s']:.2f} s CPU); slowest shard "
          f"{full['planned_ratio']:.4f} x ideal ({full['ideal_s'] / 60:.1f} min); fewest runnable tests in a shard "
          f"{full['min_runnable']}")
    compare_pytest_split([n for n in nodeids if n not in skipped], truth, args.shards)
    rng = random.Random(args.seed + 1)
    partial = {n: s for n, s in truth.items() if rng.random() >= 0.10}
    est = measure(nodeids, partial, truth, skipped, args.shards)
    print(f"10% unknown (file-median estimates): plan {est['plan_s']:.2f} s; slowest shard planned "
          f"{est['planned_ratio']:.4f} x ideal, measured on true durations {est['actual_ratio']:.4f} x")
    shuffled = nodeids[:]
    rng.shuffle(shuffled)
    same = [set(s.nodeids) for s in split(nodeids, truth, args.shards, skipped)] == \
           [set(s.nodeids) for s in split(shuffled, truth, args.shards, skipped)]
    print(f"same shards from a shuffled collection order: {same}")
    start = time.perf_counter()
    jobs = plan_jobs(paths, truth, max_job_s=1800)
    per_group = Counter(j.group for j in jobs)
    print(f"three levels (--max-job-s 1800): {len(jobs)} jobs in {time.perf_counter() - start:.2f} s; "
          f"longest expected job {max(j.expected_s for j in jobs) / 60:.1f} min; per group "
          + ", ".join(f"{g} {n}" for g, n in sorted(per_group.items())))
    ok = full["planned_ratio"] <= 1.10 and full["plan_s"] < 5
    print(f"goal (slowest <= 1.10 x ideal, planning < 5 s): {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
