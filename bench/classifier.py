"""Classifier throughput on >= 100,000 failure records built from real failure texts.

At start, real failures are produced by running torch code (assert_close mismatches, a
missing SparseCPU kernel, dtype dispatch errors, an AttributeError, a busy port) and
formatted as tracebacks, plus pytest-style ``E`` renderings of the same and faulthandler
dumps of a real segfault and a real hang from a subprocess. The records cycle over these
texts (with each one's numbers varied so no two are identical) and are classified one
by one. Prints records/s and the class counts.

    .venv/bin/python bench/classifier.py [--records 100000]
"""

from __future__ import annotations

import argparse
import collections
import itertools
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable

import torch

from testcurator.runner.results.classify import classify

FAULT_SCRIPT = (
    "import faulthandler, sys, ctypes, time\n"
    "faulthandler.enable()\n"
    "if sys.argv[1] == 'hang':\n"
    "    faulthandler.dump_traceback_later(0.5, exit=True)\n"
    "    time.sleep(10)\n"
    "ctypes.string_at(0)\n"
)


def _tb(fn: Callable[[], object]) -> str:
    try:
        fn()
    except Exception:
        return traceback.format_exc()
    raise AssertionError("expected a failure")


def _bind_twice() -> None:
    with socket.socket() as a, socket.socket() as b:
        a.bind(("127.0.0.1", 0))
        b.bind(a.getsockname())


def real_texts() -> list[tuple[str, int | None]]:
    sparse = torch.eye(3).to_sparse()
    calls: list[Callable[[], object]] = [
        lambda: torch.testing.assert_close(torch.arange(8.0), torch.arange(8.0) * 1.01),
        lambda: torch.special.zeta(sparse, sparse),
        lambda: torch.linalg.cholesky(torch.eye(3, dtype=torch.float16)),
        lambda: torch.ones(2, dtype=torch.bool).neg(),
        lambda: torch.nn.functional.no_such_function(),
        lambda: torch.ones(2).view(3),
        _bind_twice,
    ]
    texts: list[tuple[str, int | None]] = []
    for call in calls:
        tb = _tb(call)
        texts.append((tb, None))
        last = tb.strip().splitlines()[-1]
        texts.append(("    def test_x(self):\n>       run()\n" + "\n".join(f"E       {line}" for line in last.splitlines())
                      + "\n\ntest_x.py:3: " + last.split(":")[0], None))
    for mode in ("segv", "hang"):
        proc = subprocess.run([sys.executable, "-c", FAULT_SCRIPT, mode], capture_output=True, text=True)
        texts.append((proc.stderr, proc.returncode))
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    args = parser.parse_args()
    texts = real_texts()
    # Vary the numbers so every record differs (no accidental caching anywhere).
    cycle = itertools.islice(itertools.cycle(texts), args.records)
    records = [(text.replace("0", str(i % 10)) if i % 2 else text, rc) for i, (text, rc) in enumerate(cycle)]
    classes: collections.Counter[str] = collections.Counter()
    start = time.perf_counter()
    for text, rc in records:
        classes[classify(text, returncode=rc).failure_class] += 1
    elapsed = time.perf_counter() - start
    mean_len = sum(len(t) for t, _ in records) / len(records)
    print(f"records: {len(records)} from {len(texts)} real texts (mean {mean_len:.0f} chars)")
    print(f"classified in {elapsed:.2f} s: {len(records) / elapsed:,.0f} records/s")
    print("classes:", dict(sorted(classes.items())))


if __name__ == "__main__":
    main()
