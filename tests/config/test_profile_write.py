"""The drafted profile's text: what passed is listed, the rest is named in comments, it loads."""

from __future__ import annotations

from pathlib import Path

from testcurator.config.profile import load_profile
from testcurator.config.profile_write import CheckOutcome, ProfileDraft, render_profile


def test_draft_lists_what_passed_and_comments_the_rest(tmp_path: Path) -> None:
    outcomes = [
        CheckOutcome("dtype", "float32", "pass"),
        CheckOutcome("dtype", "float64", "fail", "x + x failed: NotImplementedError: no Double\nsecond line # here"),
        CheckOutcome("hook", "eager_ops", "pass"),
        CheckOutcome("hook", "fft", "crash", "crashed the probe process (signal SIGSEGV)"),
        CheckOutcome("hook", "compile", "timeout", "no result after 60 s: the probe process was killed"),
    ]
    draft = ProfileDraft(device="mydev", backend_module="my.backend:setup", outcomes=outcomes,
                         python_path=["../src", "/opt/with space"], torch_version="2.13.0",
                         command="testcurator profile init --backend-module 'my.backend:setup'\n--out x")
    text = render_profile(draft)
    (tmp_path / "backend.yaml").write_text(text, encoding="utf-8")
    profile, _ = load_profile(tmp_path / "backend.yaml")
    assert profile.hooks == ["eager_ops"] and [d.name for d in profile.supported_dtypes or []] == ["float32"]
    assert profile.backend_module == "my.backend:setup" and profile.python_path == ["../src", "/opt/with space"]
    assert profile.device.name == "mydev" and profile.preferences == []
    lines = text.splitlines()
    assert "# float64: not listed: x + x failed: NotImplementedError: no Double second line # here" in lines
    assert "# fft: not listed: crashed the probe process (signal SIGSEGV)" in lines
    assert "# compile: not listed: no result after 60 s: the probe process was killed" in lines
    # hooks without a check are not guessed; every line outside the fields is a comment
    assert any(line.startswith("# Not probed") and "complex" in line and "inductor" in line for line in lines)
    assert all(line.startswith(("#", " ", "schema_version", "name", "device", "backend_module", "python_path",
                                "hooks", "supported_dtypes", "preferences")) for line in lines)


def test_a_backend_with_nothing_working_declares_no_dtypes(tmp_path: Path) -> None:
    draft = ProfileDraft(device="bare", backend_module="bare", outcomes=[CheckOutcome("dtype", "float32", "fail", "x")])
    (tmp_path / "p.yaml").write_text(render_profile(draft), encoding="utf-8")
    profile, _ = load_profile(tmp_path / "p.yaml")
    assert profile.supported_dtypes == [] and profile.hooks == [] and profile.python_path == []
