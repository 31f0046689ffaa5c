"""``--curate-tier L1|L2|L3``: run one tier of seed 000's ladder.

- ``L1`` keeps only the instances a tiers file (``--curate-tier-file``, written by
  ``testcurator tiers``) names, matched by file, generic name, op, dtype and module, so a
  plan made from the CPU capture selects the device's instances; the rest are deselected.
- ``L2`` is the config as it is (the default).
- ``L3`` runs what the config holds back as strict-xfail probes: the curate plugin applies
  :func:`testcurator.config.apply.probe` to every decision.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from testcurator.plugin.optionset import first_time
from testcurator.tiers import TIERS, read_l1_keys, tier_key

PLUGIN_NAME = "testcurator-tiers"


def _tier(value: str) -> str:
    if value not in TIERS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(TIERS)}, got {value!r}")
    return value


def add_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    if not first_time(parser, "tier"):
        return
    group.addoption("--curate-tier", dest="curate_tier", type=_tier, default=None, metavar="TIER",
                    help="L1 (the tiers file's instances), L2 (the config, default) or L3 (held-back tests as probes)")
    group.addoption("--curate-tier-file", dest="curate_tier_file", default=None, metavar="FILE",
                    help="tiers.json written by `testcurator tiers` (needed for L1)")


def configure(config: pytest.Config) -> None:
    if config.getoption("curate_tier", None) != "L1" or config.pluginmanager.has_plugin(PLUGIN_NAME):
        return
    path = config.getoption("curate_tier_file", None)
    if not path:
        raise pytest.UsageError("--curate-tier L1 needs --curate-tier-file (written by `testcurator tiers`)")
    from testcurator.errors import CuratorError

    try:
        keys = read_l1_keys(Path(config.invocation_params.dir, path))
    except CuratorError as exc:
        raise pytest.UsageError(f"--curate-tier-file: {exc}") from exc
    config.pluginmanager.register(L1Plugin(keys), PLUGIN_NAME)


class L1Plugin:
    def __init__(self, keys: frozenset[str]) -> None:
        self.keys = keys
        self.kept = 0

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        from testcurator.plugin.identity import IDENTITY_KEY, item_identity

        keep, drop = [], []
        for item in items:
            ident = item.stash.get(IDENTITY_KEY, None) or item_identity(item)
            key = tier_key(item.nodeid.split("::", 1)[0], ident.generic, ident.op, ident.dtype, ident.module)
            (keep if key in self.keys else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep
        self.kept = len(keep)

    def pytest_report_collectionfinish(self, config: pytest.Config) -> list[str]:
        return [f"testcurator: tier L1 keeps {self.kept} tests ({len(self.keys)} chosen instances)"]


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser.getgroup("curate"), parser)


def pytest_configure(config: pytest.Config) -> None:
    configure(config)
