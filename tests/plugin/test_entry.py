"""Where ``--curate-backend`` is imported: in each process that runs tests, and not in
pytest-xdist's controller, which runs none (pytester)."""

from __future__ import annotations

from pathlib import Path

import pytest

# A backend module that logs which process imported it.
RECORDS = """
import os

with open(os.environ["IMPORTS_LOG"], "a") as log:
    log.write((os.environ.get("PYTEST_XDIST_WORKER") or "main") + "\\n")
"""
TESTS = """
def test_one():
    pass


def test_two():
    pass
"""


@pytest.mark.parametrize(("workers", "imported_in"), [((), ["main"]), (("-n", "2"), ["gw0", "gw1"])],
                         ids=["no-xdist", "xdist"])
def test_the_backend_is_imported_where_tests_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                  workers: tuple[str, ...], imported_in: list[str]) -> None:
    log = pytester.path / "imports.log"
    monkeypatch.setenv("IMPORTS_LOG", str(log))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this suite's own worker, inherited
    pytester.makepyfile(recbackend=RECORDS, test_two=TESTS)
    result = pytester.runpytest_subprocess("--curate-backend", str(Path("recbackend.py")), "-p", "no:cacheprovider",
                                           *workers)
    result.assert_outcomes(passed=2)
    assert sorted(log.read_text().split()) == imported_in
