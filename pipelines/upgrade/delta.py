"""The test-level delta between two upstream trees, by content hash.

Every test is keyed ``file::Class::test`` (a :class:`~testcurator.vocab.TestKey` as text); memory stores a content hash per test that
leaves out the function's name, line numbers and class (memory/index.py), so a test
whose key is new but whose hash belonged to a test that disappeared was moved or renamed,
not written anew. Classes, for each test of the new tree:

- unchanged: same key, same hash (its decision carries over untouched);
- changed:   same key, another hash (re-evaluated);
- added:     a new key whose hash no disappeared test had (evaluated);
- moved:     a new key whose hash a disappeared test had (decision carried over, not
             re-evaluated; "renamed" when it stayed in its file);
and removed: keys of the old tree that are gone and were not moved (dropped from configs).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from testcurator.vocab import TestKey


@dataclass(frozen=True)
class Move:
    old: str  # file::generic in the old tree
    new: str  # file::generic in the new tree

    @property
    def kind(self) -> str:
        return "renamed" if TestKey.parse(self.old).file == TestKey.parse(self.new).file else "moved"


@dataclass(frozen=True)
class TestDelta:
    unchanged: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    moved: tuple[Move, ...] = ()
    removed: tuple[str, ...] = ()
    total: int = 0  # tests of the new tree

    @property
    def evaluate(self) -> frozenset[str]:
        """The tests stages 3-4 decide again: changed and added."""
        return frozenset(self.changed) | frozenset(self.added)

    def summary(self) -> dict[str, int]:
        return {"unchanged": len(self.unchanged), "changed": len(self.changed), "added": len(self.added),
                "moved": len(self.moved), "removed": len(self.removed), "evaluated": len(self.evaluate),
                "total": self.total}


def _pick(new_key: str, candidates: list[str]) -> str:
    """The disappeared test a new one most likely came from: same name elsewhere (moved),
    then same file (renamed), then the first by name; deterministic."""
    new = TestKey.parse(new_key)
    for prefer in (lambda k: k.name == new.name, lambda k: k.file == new.file):
        hits = [k for k in candidates if prefer(TestKey.parse(k))]
        if hits:
            return hits[0]
    return candidates[0]


def classify(old: Mapping[str, str], new: Mapping[str, str]) -> TestDelta:
    """The delta from ``old`` to ``new`` (each ``file::generic`` -> content hash)."""
    unchanged = sorted(k for k in new if old.get(k) == new[k])
    changed = sorted(k for k in new if k in old and old[k] != new[k])
    gone_by_hash: dict[str, list[str]] = defaultdict(list)
    for key in sorted(set(old) - set(new)):
        gone_by_hash[old[key]].append(key)
    added, moved = [], []
    for key in sorted(set(new) - set(old)):
        candidates = gone_by_hash.get(new[key])
        if not candidates:
            added.append(key)
            continue
        source = _pick(key, candidates)
        candidates.remove(source)  # each disappeared test moves to one place
        moved.append(Move(source, key))
    claimed = {m.old for m in moved}
    removed = sorted(k for k in set(old) - set(new) if k not in claimed)
    return TestDelta(tuple(unchanged), tuple(changed), tuple(added), tuple(moved), tuple(removed), len(new))
