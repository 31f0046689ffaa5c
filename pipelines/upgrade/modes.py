"""What an upgrade decided for each re-evaluated test: its old mode, its new mode, and why.

``upgrade.md`` lists every changed and added test as ``old -> new: reason``: the mode the
old config gave it (``new`` for an added test), the mode the upgraded config gives it, and
the reason written above its entry there (or which default decides it when no entry lists
it).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from testcurator.config.loader import load_config
from testcurator.config.resolve import LoadedConfig
from testcurator.errors import ConfigError
from testcurator.vocab import TestKey

ARROW = "->"
WIDTH = 120  # markdown lines are wrapped here, at spaces: a name or a path is never cut


@dataclass(frozen=True)
class Decided:
    """A test's mode under one config, and the reason for it."""

    mode: str
    reason: str


class ModeLookup:
    """The mode a config gives a test: its entry's, else its file's or the config's default."""

    def __init__(self, config: Path, root: Path) -> None:
        self.root = root
        try:
            self.loaded: LoadedConfig | None = load_config(config, torch_root=root)
        except ConfigError:
            self.loaded = None  # a config that does not load decides nothing we can name

    def decided(self, key: TestKey) -> Decided | None:
        if self.loaded is None:
            return None
        file = self.loaded.file_for(self.root / key.file)
        if file is None:
            return Decided(self.loaded.unlisted_file_mode, "not listed: the config's unlisted_file_mode")
        entry = file.entry_for(key.name)
        if entry is None:
            return Decided(file.unlisted_test_mode, "not listed: the file's unlisted_test_mode")
        return Decided(entry.mode, " ".join((entry.reason or "(no reason written)").split()))


def mode_changes(old: ModeLookup, new: ModeLookup, keys: Sequence[str], added: Sequence[str] = ()) -> list[dict[str, str]]:
    """``{"test", "old", "new", "reason"}`` per key: ``old`` is ``(added)`` for a test the old
    tree did not have, ``?`` where a config does not load."""
    rows, fresh = [], set(added)
    for text in keys:
        key = TestKey.parse(text)
        before = None if text in fresh else old.decided(key)
        after = new.decided(key)
        was = "(added)" if text in fresh else before.mode if before else "?"
        rows.append({"test": text, "old": was, "new": after.mode if after else "?",
                     "reason": after.reason if after else "(the upgraded config does not load)"})
    return rows


def mode_line(row: dict[str, str]) -> str:
    """``- `file::Class::test`: skip -> mandatory_success: the reason`` (markdown)."""
    return f"- `{row['test']}`: {row['old']} {ARROW} {row['new']}: {row['reason']}"


def wrap(item: str, width: int = WIDTH) -> str:
    """A markdown list item over ``width`` characters, wrapped at spaces (continuation lines
    indented, so that it stays one item); a word longer than the width stays whole."""
    bullet = "- " if item.startswith("- ") else ""
    lines = textwrap.wrap(item[len(bullet):], width, initial_indent=bullet, subsequent_indent="  ",
                          break_long_words=False, break_on_hyphens=False)
    return "\n".join(lines) if lines else item
