"""pytest's failure summary at the size of a real draft: plain pytest vs the processes a run starts.

A generated file of N parametrized tests, F of them failing, run three ways side by side:
plain pytest with nothing failing (the floor), plain pytest with F failing, and the same with
``--curate-events`` (the event log a run writes, and plugin/summary.py's index of teardown
reports, which a plain pytest does not get). All with PyTorch's ``--tb=native``. pytest 9.2's
summary looks up each failure's teardown sections by scanning every passed report: the plain
run with failures grows as N x F, the indexed one as N + F.

    .venv/bin/python bench/summary.py [--tests 20000] [--failing 5000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ARGS = ("-q", "-p", "no:cacheprovider", "--tb=native")
TEMPLATE = """
import pytest

@pytest.mark.parametrize("i", range({n}))
def test_x(i):
    assert i >= {failing}
"""


def _time(folder: Path, failing: int, n: int, extra: tuple[str, ...]) -> float:
    (folder / "test_many.py").write_text(TEMPLATE.format(n=n, failing=failing), encoding="utf-8")
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "pytest", *ARGS, *extra, str(folder)], cwd=folder,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=20000)
    parser.add_argument("--failing", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        events = ("--curate-events", str(folder / "events.jsonl"))
        rows = [("plain pytest, none failing", _time(folder, 0, args.tests, ())),
                (f"plain pytest, {args.failing} failing", _time(folder, args.failing, args.tests, ())),
                (f"--curate-events, {args.failing} failing", _time(folder, args.failing, args.tests, events))]
    print(f"{args.tests} tests, --tb=native")
    for label, seconds in rows:
        print(f"  {label:<34} {seconds:7.1f} s")
    print(f"  summary cost, plain / indexed: {(rows[1][1] - rows[0][1]) / max(rows[2][1] - rows[0][1], 0.1):.1f}x "
          "(the indexed run also writes the event log)")


if __name__ == "__main__":
    main()
