"""Ingest results produced elsewhere (a CI runner with the device) into records.

:func:`load_results` takes any mix of JUnit XML files (pytest, PyTorch ``run_test.py``,
unittest-xml-reporting, the runner's own ``junit.xml``), the runner's ``results.jsonl``,
and directories of them (``test-reports/`` trees are searched recursively for ``*.xml``
and ``*.jsonl``; a run folder of ours, or of one shard, counts by its ``results.jsonl``
alone). The format is told by the suffix, else by the first character.

The same node id in several inputs is merged as successive attempts, in the order given:
a failure followed by a pass is flaky (``transient``), a failure on every attempt keeps
the first classification. This is how sharded reruns and ``run_test.py``'s retries in
separate files should read.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from testcurator.errors import BadInputError, MissingPathError
from testcurator.runner.results.junit import parse_junit
from testcurator.runner.results.records import TestRecord, read_jsonl

RESULT_SUFFIXES = (".xml", ".jsonl")


def result_files(paths: Iterable[Path]) -> list[Path]:
    """The files a list of result paths stands for (directories searched recursively)."""
    out: list[Path] = []
    for path in paths:
        if not path.exists():
            raise MissingPathError(path, "results path")
        if path.is_dir():
            found = _walk(path)
            if not found:
                raise BadInputError(f"{path}: no *.xml or *.jsonl result files in this directory")
            out.extend(found)
        else:
            out.append(path)
    return out


def _walk(folder: Path) -> list[Path]:
    """Result files under ``folder``; a run folder of ours (results.jsonl + manifest.json)
    counts by its results.jsonl alone: its junit.xml, its work/ logs and the shard folders
    it was merged from say the same again."""
    if (folder / "results.jsonl").is_file() and (folder / "manifest.json").is_file():
        return [folder / "results.jsonl"]
    found: list[Path] = []
    for child in sorted(folder.iterdir()):
        if child.is_dir():
            found.extend(_walk(child))
        elif child.suffix in RESULT_SUFFIXES:
            found.append(child)
    return found


def _sniff(path: Path) -> str:
    if path.suffix in (".xml", ".jsonl", ".json"):
        return "xml" if path.suffix == ".xml" else "jsonl"
    with path.open("rb") as fh:
        head = fh.read(512).lstrip()
    if head.startswith(b"<"):
        return "xml"
    if head.startswith(b"{"):
        return "jsonl"
    raise BadInputError(f"{path}:1: not JUnit XML or JSONL results (starts with {head[:20]!r})")


def load_file(path: Path, *, known_tests: Collection[str] | None = None, devices: Collection[str] = ()) -> list[TestRecord]:
    if _sniff(path) == "xml":
        return parse_junit(path, known_tests=known_tests, devices=devices)
    return [replace(r, source=r.source or str(path)) for r in read_jsonl(path)]


def merge_attempts(records: Sequence[TestRecord]) -> list[TestRecord]:
    """Fold records sharing a node id into one (first-seen order kept)."""
    merged: dict[str, TestRecord] = {}
    for record in records:
        old = merged.get(record.nodeid)
        if old is None:
            merged[record.nodeid] = record
            continue
        attempts = old.attempts + record.attempts
        if old.is_failure and not record.is_failure:
            evidence = f"{record.outcome} on attempt {attempts} after failing: [{old.failure_class}] {old.evidence}"
            merged[record.nodeid] = replace(record, attempts=attempts, flaky=True, failure_class="transient",
                                            evidence=evidence, failure_text=old.failure_text)
        elif old.is_failure:
            merged[record.nodeid] = replace(old, attempts=attempts)
        else:
            merged[record.nodeid] = replace(record, attempts=attempts, flaky=old.flaky or record.flaky)
    return list(merged.values())


def load_results(
    paths: Iterable[Path], *, known_tests: Collection[str] | None = None, devices: Collection[str] = (),
) -> list[TestRecord]:
    """Records from every result file (see module docstring); failures classified."""
    records: list[TestRecord] = []
    for file in result_files(paths):
        records.extend(load_file(file, known_tests=known_tests, devices=devices))
    return merge_attempts(records)
