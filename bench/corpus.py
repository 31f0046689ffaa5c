"""The real-upstream corpus (issue 36): which files of a PyTorch checkout are the ones measured.

``bench/corpus.tsv`` lists the corpus: PyTorch's own harness (``pytest.ini``,
``test/conftest.py``, ``test/pytest_shard_custom.py``, at versions that agree with each other)
and 50 upstream test files that collect on torch 2.13.0 under it, one line each: the path in a
PyTorch checkout, the upstream commit the content was taken at, the sha256 of the content and
the CPU instances a collect-only pass counts (``pytest --collect-only -q`` in the tree, with
its ``pytest.ini`` and conftest loaded). Facts only: the contents are never committed.

How it was assembled (no network here, so there is no ``--fetch``): each path's stored
versions were listed from the public code index (one or two commits per path of
pytorch/pytorch), the file read at a commit whose version imports on torch 2.13, written byte
for byte under ``<DIR>/<path>``, checked against the index's length, and collected. Files
whose every stored version failed to import were dropped (the lines starting ``#`` name them
and why). The commits are those of the index, not one upstream revision: two files of the
corpus may come from different days, which is what a tree mixing versions looks like.

    python bench/corpus.py --check DIR    # DIR: a PyTorch checkout (holds pytest.ini and test/)

says which files of DIR match the corpus (same sha256), which differ and which are missing;
exit 0 when all match, 1 when some do not, 2 when DIR is not a folder. ``--list`` prints the
corpus and its totals.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

MANIFEST = Path(__file__).with_name("corpus.tsv")
COLUMNS = ("path", "commit", "sha256", "cpu_instances")


@dataclass(frozen=True)
class Entry:
    path: str
    commit: str
    sha256: str
    cpu_instances: int | None  # None: a harness file, not a test file


def read_manifest(path: Path = MANIFEST) -> list[Entry]:
    """The corpus's entries; a line that does not have the four columns is bad input, named by line."""
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line or line.startswith("#") or line.split("\t") == list(COLUMNS):
            continue
        cells = line.split("\t")
        if len(cells) != len(COLUMNS) or len(cells[2]) != 64:
            raise SystemExit(f"{path}:{number}: expected {len(COLUMNS)} tab-separated columns "
                             f"({', '.join(COLUMNS)}), got: {line!r}")
        entries.append(Entry(cells[0], cells[1], cells[2], int(cells[3]) if cells[3] != "-" else None))
    return entries


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check(root: Path, entries: list[Entry]) -> dict[str, list[Entry]]:
    """Each entry under ``root``: ``match`` (same content), ``differ`` or ``missing``."""
    out: dict[str, list[Entry]] = {"match": [], "differ": [], "missing": []}
    for entry in entries:
        target = root / entry.path
        status = "missing" if not target.is_file() else "match" if sha256(target) == entry.sha256 else "differ"
        out[status].append(entry)
    return out


def _totals(entries: list[Entry]) -> str:
    tests = [e for e in entries if e.cpu_instances is not None]
    return (f"{len(tests)} test file(s), {sum(e.cpu_instances or 0 for e in tests)} CPU instance(s), "
            f"{len(entries) - len(tests)} harness file(s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--check", metavar="DIR", type=Path, help="a PyTorch checkout to compare with the corpus")
    group.add_argument("--list", action="store_true", help="print the corpus and its totals")
    parser.add_argument("--manifest", type=Path, default=MANIFEST, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    entries = read_manifest(args.manifest)
    if args.list:
        for e in entries:
            print(f"{e.path}\t{e.commit[:12]}\t{'-' if e.cpu_instances is None else e.cpu_instances}")
        print(f"corpus: {_totals(entries)}")
        return 0
    if not args.check.is_dir():
        print(f"{args.check}: not a folder (expected a PyTorch checkout holding pytest.ini and test/)", file=sys.stderr)
        return 2
    found = check(args.check, entries)
    for status in ("differ", "missing"):
        for e in found[status]:
            print(f"{status}\t{e.path}\t(corpus: commit {e.commit[:12]}, sha256 {e.sha256[:12]})")
    print(f"{args.check}: {len(found['match'])} of {len(entries)} corpus file(s) match, {len(found['differ'])} "
          f"differ, {len(found['missing'])} missing; matching: {_totals(found['match'])}")
    return 0 if len(found["match"]) == len(entries) else 1


if __name__ == "__main__":
    sys.exit(main())
