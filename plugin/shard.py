"""``--curate-shard K/N``: run one shard of the collected tests, split by duration.

At collection, after the config has decided every item (the curate plugin runs first) and
after ``-k``/``-m``, the items are split into N shards with :func:`testcurator.sharding.split`
and only shard K is kept (the rest are reported as deselected, as pytest-split does).
Items the config skips, or that carry an unconditional ``skip`` mark, cost nothing in the
balance. Durations come from ``--curate-durations FILE`` (pytest-split's
``.test_durations`` format); unknown ones are estimated from the same file's tests.

Every process that collects the same items with the same durations file makes the same
split, so the option works under pytest-xdist (each worker keeps the same shard) and in N
separate CI jobs (``exec --shard`` hands every leg one frozen snapshot: runner/shards/snapshot.py).
``--curate-shard-plan FILE`` writes what this leg's collection saw and what it kept
(:func:`testcurator.sharding.shard_plan`), so a merge of the legs can check they partition it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import pytest

from testcurator.errors import BadInputError
from testcurator.files import atomic_write_text
from testcurator.plugin.optionset import existing_file, first_time
from testcurator.sharding import ShardRef, Shard, shard_plan, split

PLUGIN_NAME = "testcurator-shard"


def _shard_ref(value: str) -> ShardRef:
    try:
        return ShardRef.parse(value)
    except BadInputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    if not first_time(parser, "shard"):
        return
    group.addoption("--curate-shard", dest="curate_shard", type=_shard_ref, default=None, metavar="K/N",
                    help="run only shard K of N, split by duration (skipped tests cost nothing)")
    group.addoption("--curate-durations", dest="curate_durations", type=existing_file("durations file"), default=None,
                    metavar="FILE", help="test durations for --curate-shard (pytest-split's .test_durations JSON)")
    group.addoption("--curate-shard-plan", dest="curate_shard_plan", type=Path, default=None, metavar="FILE",
                    help="write this shard's plan to FILE (JSON: the collected and kept node ids), for merges to check")


def configure(config: pytest.Config) -> None:
    ref = config.getoption("curate_shard", None)
    if ref is None or config.pluginmanager.has_plugin(PLUGIN_NAME):
        return
    plugin = ShardPlugin(ref, config.getoption("curate_durations", None), config.getoption("curate_shard_plan", None))
    config.pluginmanager.register(plugin, PLUGIN_NAME)


def skipped_at_collection(item: pytest.Item) -> bool:
    """The config skips it (the curate plugin, tryfirst, marks it ``skip``), or it carries a
    skip mark that needs no evaluation."""
    if item.get_closest_marker("skip") is not None:
        return True
    return any(mark.args and all(arg is True for arg in mark.args) for mark in item.iter_markers("skipif"))


class ShardPlugin:
    def __init__(self, ref: ShardRef, durations: Path | None, plan_out: Path | None = None) -> None:
        self.ref = ref
        self.durations = durations
        self.plan_out = plan_out
        self.shard: Shard | None = None
        self.total = 0

    def _known(self) -> dict[str, float]:
        if self.durations is None:
            return {}
        from testcurator.sharding import read_test_durations

        try:
            return read_test_durations(self.durations)
        except BadInputError as exc:
            raise pytest.UsageError(f"--curate-durations: {exc}") from exc

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        nodeids = [item.nodeid for item in items]
        skipped = [item.nodeid for item in items if skipped_at_collection(item)]
        self.total = len(items)
        self.shard = split(nodeids, self._known(), self.ref.count, skipped)[self.ref.index - 1]
        if self.plan_out is not None:
            self._write_plan(nodeids, self.shard)
        keep = set(self.shard.nodeids)
        config.hook.pytest_deselected(items=[item for item in items if item.nodeid not in keep])
        items[:] = [item for item in items if item.nodeid in keep]

    def _write_plan(self, nodeids: list[str], shard: Shard) -> None:
        # Atomic: under xdist every worker writes the same plan, at about the same time.
        # "written" lets the runner tell this run's plan from one a previous run left in --out.
        digest = hashlib.sha256(self.durations.read_bytes()).hexdigest() if self.durations is not None else None
        plan = {**shard_plan(self.ref, nodeids, shard, digest), "written": time.time()}
        atomic_write_text(self.plan_out, json.dumps(plan, indent=1) + "\n")

    def pytest_report_collectionfinish(self, config: pytest.Config) -> list[str]:
        if self.shard is None:
            return []
        return [f"testcurator: shard {self.ref} keeps {len(self.shard.nodeids)} of {self.total} tests "
                f"({self.shard.runnable} to run, expected {self.shard.expected_s:.1f} s)"]


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser.getgroup("curate"), parser)


def pytest_configure(config: pytest.Config) -> None:
    configure(config)
