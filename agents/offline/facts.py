"""What the offline brain's bucket rules know about one test, and the edits they build up.

Apart from the rules (agents/offline/bucket.py, and the probe rule in
agents/offline/probe.py, which the bucket's rule table lists) so that both read them
without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from testcurator.agents.offline.rules import Wish


@dataclass(frozen=True)
class Deco:
    """One decorator of the test: its last name (``onlyCUDA``), its arguments and its text."""

    short: str
    args: str
    text: str


@dataclass
class Draft:
    """Edits the ops/dtypes rules add before a later rule decides the mode."""

    exclude_dtypes: list[str] = field(default_factory=list)
    exclude_ops: list[str] = field(default_factory=list)
    exclude_modules: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)

    def clause(self) -> str:
        return f", with {'; '.join(self.notes)}" if self.notes else ""


@dataclass(frozen=True)
class Facts:
    """The test's decorators, the hooks the backend has after the wishes, and the features
    the test needs ({feature: what shows it})."""

    decos: tuple[Deco, ...]
    hooks: frozenset[str] | None
    wishes: tuple[Wish, ...]
    needs: dict[str, str]
