"""``-p testcurator.plugin.collect``: write every collected item as one JSON line.

Loaded into the child ``pytest --collect-only`` that :func:`testcurator.runner.collect.collect`
starts (never in the caller's process). Each record names the item in generic terms and
carries its keywords, the names ``pytest -k`` matches against (every node name in the
item's chain but the session's, plus marker names). A file that does not collect (an
ImportError from version skew, a syntax error) becomes one ``{"error": ...}`` record with
pytest's whole report, so the caller can say why, from its first line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from testcurator.plugin.identity import item_identity

OUT_OPTION = "--curate-collect-out"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(OUT_OPTION, dest="curate_collect_out", default=None, help="write collected items as JSON lines")


class _Recorder:
    """Holds the failed collection reports of this session (one per child process)."""

    def __init__(self) -> None:
        self.errors: list[pytest.CollectReport] = []

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.errors.append(report)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        out = session.config.getoption("curate_collect_out")
        if not out:
            return
        records = [_record(item) for item in session.items]
        records += [_error(session, report) for report in self.errors]
        Path(out).write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records), encoding="utf-8")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_Recorder(), "testcurator-collect-recorder")


def _error(session: pytest.Session, report: pytest.CollectReport) -> dict[str, Any]:
    path = session.config.rootpath / report.nodeid.split("::")[0]
    return {"error": report.nodeid, "file": os.path.realpath(str(path)), "text": report.longreprtext}


def _record(item: pytest.Item) -> dict[str, Any]:
    ident = item_identity(item)
    cls = getattr(item, "cls", None)
    keywords = {node.name for node in item.listchain() if not isinstance(node, pytest.Session)}
    keywords.update(mark.name for node in item.listchain() for mark in node.own_markers)
    return {
        "nodeid": item.nodeid,
        "file": os.path.realpath(str(item.path)),
        "cls": cls.__name__ if cls is not None else "",
        "name": item.name,
        "generic": ident.generic,
        "device": ident.device,
        "dtype": ident.dtype,
        "op": ident.op_formatted,
        "module": ident.module,
        "keywords": sorted(keywords),
    }
