"""needs.py: a missing tool or module skips a test, except in CI, where it fails it."""

from __future__ import annotations

import needs
import pytest

ABSENT = "testcurator-no-such-tool"


@pytest.mark.parametrize("ci", ["", "0", "false"])
def test_outside_ci_a_missing_requirement_skips(monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match=ABSENT):
        needs.command(ABSENT, hint="h")
    with pytest.raises(pytest.skip.Exception, match="testcurator_no_such_tool_mod is not installed"):
        needs.module("testcurator_no_such_tool_mod", hint="h")


@pytest.mark.parametrize("ci", ["true", "1", "TRUE"])
def test_in_ci_a_missing_requirement_fails(monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match=f"{ABSENT}.*CI=true"):
        needs.command(ABSENT, hint="h")
    with pytest.raises(pytest.fail.Exception, match=r"^testcurator_no_such_tool_mod not installed \(h\)"):
        needs.modules("json", "testcurator_no_such_tool_mod", "os", hint="h")  # names only what is absent


def test_what_is_there_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    assert needs.command(ABSENT, "sh", hint="h").endswith("/sh")
    assert needs.module("json", hint="h").dumps([]) == "[]"
    needs.modules("json", "os", hint="h")  # no failure: both are there
