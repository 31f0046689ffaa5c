"""``testcurator history``: the runs of an ``--out``, per file and per test, as text or JSON.

Runs come from the history store (memory/history.py), oldest first, each with its identity
and its curated run's counts (passing, held back, failing instances). ``--file`` adds that
file's counts per run; ``--test`` adds a test's status per run (``P`` passed, ``F`` failed,
``.`` did not run; ``-`` the run is compacted) and its failing instances' last failure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from testcurator.errors import BadInputError
from testcurator.memory.history import History, RunIdentity
from testcurator.vocab import TestKey

Counts = tuple[int, int, int]


def _sum(per_file: Mapping[str, Counts], only: str | None = None) -> Counts:
    rows = [c for f, c in per_file.items() if only is None or f == only]
    return (sum(c[0] for c in rows), sum(c[1] for c in rows), sum(c[2] for c in rows))


def overview(history: History, out_dir: str | None, *, file: str | None = None, test: str | None = None,
             last: int | None = None) -> dict[str, Any]:
    """The data ``history`` prints (also its ``--format json``)."""
    runs = history.runs(out_dir)
    if not runs:
        where = f"of {out_dir} " if out_dir else ""
        raise BadInputError(f"no run {where}is recorded in {history.path} (`testcurator run` records every run)")
    runs = runs[-last:] if last else runs
    counts = history.counts(out_dir)
    rows = []
    for run in runs:
        per = counts.get(run.seq, {})
        row: dict[str, Any] = {**run.to_json(), "passing": _sum(per)[0], "held_back": _sum(per)[1],
                               "failing": _sum(per)[2]}
        if file is not None:
            row["file"] = dict(zip(("passing", "held_back", "failing"), _sum(per, file)))
        rows.append(row)
    data: dict[str, Any] = {"state": str(history.path), "out_dir": out_dir, "runs": rows,
                            "files": sorted({f for per in counts.values() for f in per})}
    if test is not None:
        data["test"] = _test(history, runs, test)
    return data


def _test(history: History, runs: Sequence[RunIdentity], name: str) -> dict[str, Any]:
    key = TestKey.parse(name)
    if not key.test:
        raise BadInputError(f"--test {name!r}: expected file::Class::test (as report.md names tests)")
    full = [r for r in runs if not r.compacted]
    statuses = history.statuses([r.seq for r in full]).get(key, {})
    marks = [statuses.get(r.seq, ".") if not r.compacted else "-" for r in runs]
    last_failure = None
    for run in reversed(full):
        failing = {k: v for k, v in history.failures(run.seq, "judge").items() | history.failures(run.seq, "draft").items()
                   if k.startswith(f"{key.file}::")}
        mine = sorted((k, v) for k, v in failing.items() if _same_test(k, key))
        if mine:
            last_failure = {"run_id": run.run_id, "date": run.date, "instance": mine[0][0],
                            "outcome": mine[0][1][0], "class": mine[0][1][1], "evidence": mine[0][1][2]}
            break
    return {"test": str(key), "timeline": " ".join(marks), "last_failure": last_failure}


def _same_test(instance: str, key: TestKey) -> bool:
    """Whether an instance key (``file::Class::test_x_dev_float32``) is an instance of ``key``."""
    inst = TestKey.parse(instance)
    return inst.cls == key.cls and (inst.test == key.test or inst.test.startswith(key.test + "_"))


def text(data: Mapping[str, Any]) -> list[str]:
    """``history``'s text output."""
    runs = data["runs"]
    lines = [f"{len(runs)} run(s) of {data['out_dir'] or 'every --out'} ({data['state']}), oldest first:",
             f"  {'run':<34} {'date':<25} {'torch':<12} {'backend':<16} {'exit':>4} {'passing':>8} {'held back':>9} "
             f"{'failing':>7}"]
    for r in runs:
        lines.append(f"  {r['run_id']:<34} {r['date']:<25} {r['torch_version']:<12} {r['backend_digest']:<16} "
                     f"{'-' if r['exit_code'] is None else r['exit_code']:>4} {r['passing']:>8} {r['held_back']:>9} "
                     f"{r['failing']:>7}" + (" (compacted)" if r["compacted"] else ""))
    if runs and "file" in runs[0]:
        lines.append("per run, this file's passing / held back / failing instances:")
        lines += [f"  {r['run_id']:<34} {r['file']['passing']:>6} / {r['file']['held_back']} / {r['file']['failing']}"
                  for r in runs]
    test = data.get("test")
    if test:
        lines.append(f"{test['test']}: {test['timeline']}  (oldest first: P passed, F failed, . did not run)")
        fail = test.get("last_failure")
        lines.append(f"  last failure: run {fail['run_id']} ({fail['date']}): {fail['instance']}: {fail['outcome']}"
                     + (f" [{fail['class']}]" if fail["class"] else "") + (f" {fail['evidence']}" if fail["evidence"] else "")
                     if fail else "  no failure on record")
    return lines
