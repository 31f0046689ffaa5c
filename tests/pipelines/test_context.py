"""A run's preflight: both checks run, at once, and the backend's error comes first."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from testcurator.errors import BadInputError
from testcurator.pipelines import context


@pytest.mark.parametrize(("backend_fails", "harness_fails", "raised"), [
    (True, True, "backend"), (False, True, "harness"), (True, False, "backend"), (False, False, None),
])
def test_both_checks_run_together_and_the_backends_error_comes_first(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, backend_fails: bool, harness_fails: bool,
        raised: str | None) -> None:
    both_started = threading.Barrier(2, timeout=30)  # a check that ran after the other ended would wait here in vain
    ran: list[str] = []

    def check(name: str, fails: bool) -> Any:
        def run(*_: Any) -> None:
            both_started.wait()
            ran.append(name)
            if fails:
                raise BadInputError(f"{name} is broken")
        return run

    monkeypatch.setattr(context, "_check_backend", check("backend", backend_fails))
    monkeypatch.setattr(context, "_check_harness", check("harness", harness_fails))
    if raised is None:
        context._preflight(None, tmp_path / "backend.yaml", tmp_path, tmp_path / "state")  # type: ignore[arg-type]
    else:
        with pytest.raises(BadInputError, match=f"^{raised} is broken$"):
            context._preflight(None, tmp_path / "backend.yaml", tmp_path, tmp_path / "state")  # type: ignore[arg-type]
    assert sorted(ran) == ["backend", "harness"]
