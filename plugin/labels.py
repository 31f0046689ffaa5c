"""``--curate-labels trunk,nightly``: run only what carries one of the given labels.

A file's labels are its config document's ``labels`` and the file entry's own
(config/resolve.py ``ResolvedFile.labels``). At collection, every test of a file carrying
none of the given labels is deselected, and so is every test of a file the config does not
list (it carries no label). The terminal summary says what was left out by label, per
file; the counts come from a worker under pytest-xdist (every worker collects the same
items). Needs ``--curate-config``.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from testcurator.plugin.optionset import first_time

PLUGIN_NAME = "testcurator-labels"
OUTPUT_KEY = "testcurator_labels"
UNLISTED = "(files the config does not list)"


def _labels(value: str) -> tuple[str, ...]:
    labels = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    if not labels:
        raise argparse.ArgumentTypeError(f"expected one or more labels separated by commas, got {value!r}")
    return labels


def add_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    if not first_time(parser, "labels"):
        return
    group.addoption("--curate-labels", dest="curate_labels", type=_labels, default=None, metavar="LABEL[,LABEL]",
                    help="run only the tests of config files carrying one of these labels (config or file `labels:`)")


def configure(config: pytest.Config) -> None:
    labels = config.getoption("curate_labels", None)
    if not labels or config.pluginmanager.has_plugin(PLUGIN_NAME):
        return
    curate = config.pluginmanager.get_plugin("testcurator-curate")
    if curate is None:
        raise pytest.UsageError("--curate-labels needs --curate-config (labels are written in the config)")
    config.pluginmanager.register(LabelsPlugin(curate, labels), PLUGIN_NAME)


class LabelsPlugin:
    def __init__(self, curate: Any, labels: tuple[str, ...]) -> None:
        self.curate = curate  # the CuratePlugin: its loaded config and file lookup
        self.labels = labels
        self.kept = 0
        self.left_out: Counter[str] = Counter()  # file (or UNLISTED) -> tests left out
        self.file_labels: dict[str, list[str]] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        wanted = set(self.labels)
        keep, drop = [], []
        for item in items:
            file = self.curate.file_for(Path(str(item.path)))
            if file is not None and wanted & set(file.labels):
                keep.append(item)
                continue
            drop.append(item)
            key = str(file.resolved_path) if file is not None else UNLISTED
            self.left_out[key] += 1
            self.file_labels[key] = list(file.labels) if file is not None else []
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep
        self.kept = len(keep)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[OUTPUT_KEY] = {"kept": self.kept, "left_out": dict(self.left_out),
                                        "file_labels": self.file_labels}

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        data = getattr(node, "workeroutput", {}).get(OUTPUT_KEY)
        if data is not None and not self.kept and not self.left_out:
            self.kept, self.left_out = data["kept"], Counter(data["left_out"])
            self.file_labels = data["file_labels"]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        write = terminalreporter.write_line
        total = sum(self.left_out.values())
        write(f"testcurator labels {','.join(self.labels)}: {self.kept} test(s) kept, "
              f"{total} left out by label")
        for path, count in sorted(self.left_out.items()):
            carried = ", ".join(self.file_labels.get(path) or []) or "no label"
            write(f"  left out: {path}: {count} test(s) (labels: {carried})")


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser.getgroup("curate"), parser)


def pytest_configure(config: pytest.Config) -> None:
    configure(config)
