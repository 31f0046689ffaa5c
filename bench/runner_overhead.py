"""Runner overhead: `testcurator exec` machinery vs plain `pytest -n 2` on the same tests.

Generates ~300 fast device-generic tests (6 files, each ``@ops`` over a different 50-op
slice of the real ``op_db`` on CPU, float32: real OpInfo objects, as the runner meets them
in upstream files; the bodies only touch the OpInfo so the figure is the machinery's),
then times, side by side in one run, a plain
``python -m pytest -n 2`` and :func:`testcurator.runner.execute.execute` with 2 workers
(event log with fsync per test start, hang guard armed, progress polling, records,
junit.xml and manifest written). Prints both wall times and their ratio.

    .venv/bin/python bench/runner_overhead.py [--tests-per-file 50] [--files 6]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testcurator.runner.command import RunSpec
from testcurator.runner.execute import execute

SAME_ARGS = ("-p", "no:cacheprovider", "-q")


TEMPLATE = """\
import torch
from torch.testing._internal.common_utils import TestCase
from torch.testing._internal.common_device_type import instantiate_device_type_tests, ops
from torch.testing._internal.common_methods_invocations import op_db


class TestGen{f}(TestCase):
    @ops(op_db[{start}:{end}], allowed_dtypes=(torch.float32,))
    def test_op(self, device, dtype, op):
        self.assertTrue(op.name)


instantiate_device_type_tests(TestGen{f}, globals(), only_for="cpu")
"""


def make_tests(root: Path, files: int, per_file: int) -> list[str]:
    paths = []
    for f in range(files):
        path = root / f"test_gen_{f}.py"
        path.write_text(TEMPLATE.format(f=f, start=f * per_file, end=(f + 1) * per_file), encoding="utf-8")
        paths.append(str(path))
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=6)
    parser.add_argument("--tests-per-file", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = make_tests(root, args.files, args.tests_per_file)
        start = time.perf_counter()
        plain = subprocess.run([sys.executable, "-m", "pytest", *paths, "-n", "2", *SAME_ARGS], cwd=root,
                               capture_output=True, text=True)
        plain_s = time.perf_counter() - start
        start = time.perf_counter()
        result = execute(RunSpec(out_dir=root / "out", paths=tuple(paths), workers=2, retries=0, timeout=60,
                                 rootdir=root, extra_args=("-q",)))
        runner_s = time.perf_counter() - start
    n = len(result.records)
    print(f"tests: {n} (plain pytest rc={plain.returncode}; runner passed="
          f"{sum(r.outcome == 'passed' for r in result.records)})")
    print(f"plain pytest -n 2:      {plain_s:7.2f} s")
    print(f"testcurator runner -n 2: {runner_s:7.2f} s")
    print(f"overhead ratio (runner / plain): {runner_s / plain_s:.2f}")


if __name__ == "__main__":
    main()
