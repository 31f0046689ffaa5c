"""upgrade.md names each re-evaluated test's old -> new mode and the reason; an upgrade's
report never says the curated suite held, having no verification run (issue 25)."""

from __future__ import annotations

import json
from pathlib import Path

from testcurator.pipelines.report import finish_report
from testcurator.pipelines.upgrade.workflow import _markdown
from testcurator.pipelines.upgrade.modes import ModeLookup, mode_changes, wrap

TEST_FILE = "class TestA:\n    def test_x(self):\n        pass\n\n    def test_y(self):\n        pass\n"


def _config(path: Path, mode: str, reason: str) -> Path:
    path.write_text(f"""test_suite_config:
  files:
    - path: ${{TORCH_ROOT}}/test/test_a.py
      unlisted_test_mode: xfail
      tests:
        # {reason}
        - names: [TestA::test_x]
          mode: {mode}
""")
    return path


def test_modes_old_to_new_with_the_new_reason(tmp_path: Path) -> None:
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "test_a.py").write_text(TEST_FILE)
    old = ModeLookup(_config(tmp_path / "old.yaml", "skip", "Skip: needs aten::foo."), tmp_path)
    new = ModeLookup(_config(tmp_path / "new.yaml", "mandatory_success", "Passes now: aten::foo landed."), tmp_path)
    rows = mode_changes(old, new, ["test/test_a.py::TestA::test_x", "test/test_a.py::TestA::test_y",
                                   "test/test_b.py::TestB::test_z"], added=["test/test_b.py::TestB::test_z"])
    assert rows == [
        {"test": "test/test_a.py::TestA::test_x", "old": "skip", "new": "mandatory_success",
         "reason": "Passes now: aten::foo landed."},
        {"test": "test/test_a.py::TestA::test_y", "old": "xfail", "new": "xfail",
         "reason": "not listed: the file's unlisted_test_mode"},
        {"test": "test/test_b.py::TestB::test_z", "old": "(added)", "new": "skip",
         "reason": "not listed: the config's unlisted_file_mode"}]


def _upgrade_data(usage: dict[str, int]) -> dict[str, object]:
    reason = "Skip: " + " ".join(["the backend lacks aten::foo for this dtype"] * 8)
    return {"old_root": "/old", "new_root": "/new", "evaluated": "evaluated 1 of 3 tests", "executed": False,
            "counts": {"changed": 1, "added": 0, "unchanged": 2, "moved": 0, "removed": 0},
            "changed": ["test/test_a.py::TestA::test_x"], "added": [], "moved": [], "removed": [],
            "dropped_entries": [], "imports": {"stopped": {}, "again": [], "still": {}}, "emit": {},
            "usage": usage, "seconds": 1.0,
            "modes": [{"test": "test/test_a.py::TestA::test_x", "old": "mandatory_success", "new": "skip",
                       "reason": reason}]}


def test_upgrade_md_lists_old_to_new_and_wraps_long_lines() -> None:
    md = _markdown(_upgrade_data({"calls": 0, "prompt_tokens": 0}))
    assert "- `test/test_a.py::TestA::test_x`: mandatory_success -> skip: Skip: the backend lacks" in md
    assert max(len(line) for line in md.splitlines()) <= 120
    assert "LLM usage" not in md  # all zero: the offline brain decided
    assert "## LLM usage" in _markdown(_upgrade_data({"calls": 3, "prompt_tokens": 900}))


def test_wrap_never_cuts_a_name() -> None:
    name = "test/test_ops.py::" + "TestCommon" * 20
    assert wrap(f"- `{name}`: short", 60).splitlines()[0] == f"- `{name}`:"


def test_report_without_verification_does_not_say_held(tmp_path: Path) -> None:
    data = {"backend": "b", "device": "d", "torch_root": "/t", "decided_by": "bucket", "run": {},
            "totals": {"mandatory_success": 1, "xfail": 0, "xfail_strict": 0, "skip": 0}, "per_file": {},
            "held_back": {}, "scope": [], "needs_review": [], "brains": {}, "usage": {}, "verify": None}
    (tmp_path / "report.json").write_text(json.dumps(data))
    assert finish_report(tmp_path, "testcurator upgrade ...") == 0
    md = (tmp_path / "report.md").read_text()
    assert "the curated suite held" not in md and "**not verified on the device (no verification run)" in md
