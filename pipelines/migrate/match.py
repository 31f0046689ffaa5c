"""Matching skip-list patterns against collected tests, for :mod:`testcurator.pipelines.migrate.importers`.

Each pattern ends in one of these kinds (a :class:`PatternRow`):

- ``exact``: it names one instantiated test; ``substring``: it matched several, or through a
  class/module name (``pytest -k`` semantics; flagged for a human decision, see the report);
- ``device-only``: it names a variant that the collection device never instantiates (a
  dtype only the target device has, ``..._xpu_complex32``, or a ``@dtypesIfCUDA``-only
  half), resolved on its generic test, op and dtype from the instances that do exist;
- ``unmatched`` (with the reason), or ``not-loaded`` (its file did not collect).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from testcurator.names import KNOWN_DEVICES, dtype_parts, split_device_class
from testcurator.pipelines.migrate.exporters import key_matches, parse_key
from testcurator.pipelines.migrate.readers import Pattern
from testcurator.runner.collect import CollectedTest
from testcurator.vocab import split_name


@dataclass(frozen=True)
class DeviceOnly:
    """A pattern resolved without a collected instance: generic test, op, dtypes (or all)."""

    generic: str
    op: str | None
    dtypes: tuple[str, ...]  # empty: the whole test (not instantiated here at all)
    widened: str = ""  # what else the exclusion takes on the device, when not exact


@dataclass(frozen=True)
class PatternRow:
    """One line of the exactness report."""

    file: str
    pattern: str
    kind: str  # exact | substring | device-only | unmatched | not-loaded
    instances: tuple[str, ...]
    generic: tuple[tuple[str, str], ...]  # (generic name, "full" | "k/M" | "device-only")
    via_keyword: bool = False  # matched through a class/module/folder name, not the test name
    reason: str = ""  # why unmatched/not loaded; for device-only, what it resolved to
    device_only: DeviceOnly | None = None


class SubstringMatcher:
    """pytest ``-k`` identifier semantics: case-insensitive substring of any keyword.

    ``as_device``: the list was written for that device (``xpu``) while collection here
    instantiates for another (``cpu``); the device's name in a pattern is rewritten to the
    collected test's device before matching.
    """

    def __init__(self, as_device: str | None = None) -> None:
        self.as_device = as_device.lower() if as_device else None

    def needle(self, pattern: str, test: CollectedTest) -> str:
        needle = pattern.lower()
        if self.as_device and test.device and self.as_device != test.device.lower():
            needle = needle.replace(self.as_device, test.device.lower())
        return needle

    def __call__(self, pattern: str, test: CollectedTest) -> bool:
        needle = self.needle(pattern, test)
        return any(needle in kw.lower() for kw in test.keywords)

    def kind(self, pattern: str, matched: Sequence[CollectedTest]) -> tuple[str, bool]:
        """(exact | substring, whether any hit came through a non-test-name keyword)."""
        via = any(self.needle(pattern, t) not in t.name.lower() for t in matched)
        exact = len(matched) == 1 and self.needle(pattern, matched[0]) in (matched[0].name.lower(), matched[0].instance.lower())
        return ("exact" if exact else "substring"), via


class DisabledKeyMatcher:
    """PyTorch's disabled-test rule; kinds: exact, suffix-stripped (all dtypes), class-prefix."""

    as_device = None

    def __call__(self, pattern: str, test: CollectedTest) -> bool:
        return key_matches(parse_key(pattern), test)

    def kind(self, pattern: str, matched: Sequence[CollectedTest]) -> tuple[str, bool]:
        key = parse_key(pattern)
        same_class = all(key.cls in (t.cls, split_device_class(t.cls)[0]) for t in matched)
        if not same_class:
            return "class-prefix", True
        return ("exact" if all(t.name == key.test for t in matched) else "suffix-stripped"), False


Matcher = SubstringMatcher | DisabledKeyMatcher


def match_patterns(file: str, patterns: Sequence[Pattern], tests: Sequence[CollectedTest], matcher: Matcher,
                   defined: Collection[str] = ()) -> tuple[list[PatternRow], dict[str, set[str]]]:
    """Per pattern, its report row; and per pattern text, the node ids it matched.

    ``defined``: the file's ``Class::test`` names (static), to place patterns on tests the
    collection device does not instantiate.
    """
    by_generic: dict[str, list[CollectedTest]] = {}
    for t in tests:
        by_generic.setdefault(t.generic, []).append(t)
    rows, hits = [], {}
    stems: dict[str, list[CollectedTest]] = {}
    for pattern in patterns:
        matched = [t for t in tests if matcher(pattern.text, t)]
        hits[pattern.text] = {t.nodeid for t in matched}
        if not matched:
            if not stems:
                for t in tests:
                    stems.setdefault(_stem(t), []).append(t)
            rows.append(_unmatched_row(file, pattern.text, tests, stems, by_generic, matcher.as_device, defined))
            continue
        kind, via = matcher.kind(pattern.text, matched)
        generic = []
        for g in sorted({t.generic for t in matched}):
            k, m = sum(1 for t in by_generic[g] if t.nodeid in hits[pattern.text]), len(by_generic[g])
            generic.append((g, "full" if k == m else f"{k}/{m}"))
        rows.append(PatternRow(file, pattern.text, kind, tuple(sorted(t.instance for t in matched)), tuple(generic), via))
    return rows, hits


# --- patterns nothing collected matches ---------------------------------------------------
def _unmatched_row(file: str, pattern: str, tests: Sequence[CollectedTest], stems: dict[str, list[CollectedTest]],
                   by_generic: dict[str, list[CollectedTest]], as_device: str | None,
                   defined: Collection[str]) -> PatternRow:
    resolved = device_only(pattern, stems, by_generic, as_device, defined) if as_device else None
    if resolved is not None:
        what = f"dtype {', '.join(resolved.dtypes)}" if resolved.dtypes else "the whole test"
        on = f"{resolved.generic}" + (f" op {resolved.op}" if resolved.op else "")
        reason = f"{on}, {what}: not instantiated on the collection device" + (f"; {resolved.widened}" if resolved.widened else "")
        return PatternRow(file, pattern, "device-only", (), ((resolved.generic, "device-only"),), False, reason, resolved)
    return PatternRow(file, pattern, "unmatched", (), (), False, _why_unmatched(pattern, tests, as_device, defined))


def _split_device(pattern: str, device: str) -> tuple[str, tuple[str, ...]] | None:
    """``test_x_op_xpu_float16`` -> (``test_x_op``, (``float16``,)); None if no device suffix."""
    low = pattern.lower()
    marker = f"_{device}"
    idx = low.rfind(marker + "_")
    if idx > 0:
        parts = dtype_parts(low[idx + len(marker) + 1:])
        if not parts[-1].endswith("\0"):
            return low[:idx], tuple(parts)
    if low.endswith(marker):
        return low[: -len(marker)], ()
    return None


def _stem(test: CollectedTest) -> str:
    """The instance name less its device and dtype suffix (``test_x_op``)."""
    name = test.name.lower()
    idx = name.rfind(f"_{(test.device or '').lower()}")
    return name[:idx] if test.device and idx > 0 else name


def device_only(pattern: str, stems: dict[str, list[CollectedTest]], by_generic: dict[str, list[CollectedTest]],
                as_device: str, defined: Collection[str]) -> DeviceOnly | None:
    """Place a pattern for a variant the collection device lacks, or None. ``stems``: the
    file's instances by name less device and dtype suffix."""
    split = _split_device(pattern, as_device.lower())
    if split is None:
        return None
    stem, dtypes = split
    same = stems.get(stem, [])
    if same and dtypes:
        generic, op = same[0].generic, same[0].op
        siblings = [t for t in by_generic[generic] if t.op == op]
        others = sorted({_stem(t) for t in siblings} - {stem})
        widened = (f"the exclusion also takes {', '.join(dtypes)} from {len(others)} other variant(s) of the test"
                   f" on the device (an edit cannot name parameters or modules)") if others else ""
        return DeviceOnly(generic, op, dtypes, widened)
    # No instance at all here: a test of the file the collection device does not instantiate.
    for generic in sorted(defined):
        if split_name(generic)[1].lower() == stem and generic not in by_generic:
            return DeviceOnly(generic, None, dtypes)
    return None


def _why_unmatched(pattern: str, tests: Sequence[CollectedTest], as_device: str | None, defined: Collection[str]) -> str:
    named = [d for d in pattern_devices(pattern) if d not in {(t.device or "").lower() for t in tests}]
    if not as_device and named:
        return f"it names device {named[0]} (pass --as-device {named[0]})"
    low = pattern.lower()
    prefixes = [g for g in defined if low.startswith(split_name(g)[1].lower() + "_")]
    if prefixes:
        best = max(prefixes, key=len)
        return (f"{best} exists, but no variant of it is named so in this version of the file "
                "(an op, dtype or parameter that is gone or renamed)")
    if not tests:
        return "the file collected no tests"
    return "no test of this version of the file is named so (removed or renamed upstream?)"


# --- which device the list was written for ----------------------------------------------
_DEVICES = tuple(d for d in KNOWN_DEVICES if d not in ("cpu", "meta", "lazy"))


def pattern_devices(pattern: str) -> list[str]:
    """The device names a pattern carries as a name part (``test_x_xpu_float32`` -> xpu)."""
    parts = set(re.split(r"[^a-z0-9]+", pattern.lower()))
    return [d for d in _DEVICES if d in parts]


def guess_device(patterns: Sequence[str]) -> tuple[str, int] | None:
    """The device most patterns name, with how many, when that is more than half of them."""
    counts = Counter(d for p in patterns for d in pattern_devices(p)[:1])
    if not counts:
        return None
    device, n = counts.most_common(1)[0]
    return (device, n) if 2 * n > len(patterns) else None
