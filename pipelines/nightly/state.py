"""The state type of every graph, in one place.

State holds ids and paths only: bulky data (decisions, execution records, memory) lives
in the run directory and the stores, so each SQLite checkpoint stays small.
"""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict


class NightlyState(TypedDict, total=False):
    """The nightly pipeline (pipelines/nightly/graph.py)."""

    run_dir: str  # where every stage writes its outputs (stores/run.py)
    files: list[str]  # upstream test files kept by scope, relative to the torch root
    bucketed: Annotated[list[str], operator.add]  # files whose bucket decisions are stored
    executed: bool  # the draft suite ran on the device (results in run_dir/exec)
    refined: Annotated[list[str], operator.add]  # files whose refined decisions are stored
    emitted: list[str]  # config files written, relative to the output directory
    verified: bool
    report: str  # path of the markdown report


class FileTask(TypedDict):
    """What a per-file fan-out node (bucket_file, refine_file) receives through Send."""

    run_dir: str
    file: str
