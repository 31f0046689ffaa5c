"""What ``enable-op`` works with: its options, one admitted test, and its result.

Apart from the workflow (pipelines/enable_op/workflow.py) so that ``--execute``
(pipelines/enable_op/execute.py), which the workflow calls, reads them too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from testcurator.config.editor import EntrySpec


@dataclass(frozen=True)
class EnableOptions:
    """What ``enable-op`` was asked: the op, the config it edits and where to look."""

    op: str
    config: Path
    state_dir: Path
    torch_root: Path | None = None
    backend: Path | None = None
    execute: bool = False
    dry_run: bool = False
    timeout: float = 300.0
    probe: bool = True  # consult (and fill) the capability table before admitting


@dataclass(frozen=True)
class Admission:
    """One test admitted by the op: the entry changed, and the one put back if execution
    disproves it."""

    key: str  # file::generic (a TestKey as text)
    kind: str  # ops_exclude | mode | supported_ops
    yaml: str  # config file holding the entry
    raw_path: str
    old_mode: str
    spec: EntrySpec | None  # the admitted entry (None: admitted by the global capability alone)
    original: EntrySpec | None  # the entry before, put back if execution disproves the admission


@dataclass
class EnableResult:
    """What ``enable-op`` found and did, as the command reports it."""

    op: str
    admitted: list[Admission] = field(default_factory=list)
    still_held: list[dict[str, str]] = field(default_factory=list)  # exercise OP, held back by more
    executed: dict[str, str] = field(default_factory=dict)  # key -> passed | failed: class | not run
    table: dict[str, str] = field(default_factory=dict)  # OP's calls the admitted tests make -> probe status
    run_dtypes: dict[str, frozenset[str]] = field(default_factory=dict)  # key -> its file's declared dtypes
    diff: str = ""

    def summary(self) -> str:
        passed = sum(v == "passed" for v in self.executed.values())
        run = f"; on the device {passed} of {len(self.executed)} passed" if self.executed else ""
        return (f"enable-op {self.op}: admitted {len(self.admitted)} test(s), "
                f"{len(self.still_held)} still held back by other ops or the device{run}")
