"""The offline nightly pipeline end to end on a copy of the example tree, without execution:
configs that validate and give every entry its reason, a report whose counts match the
configs, an unchanged rerun that changes no byte, and human edits that survive regeneration.

Three runs (module-scoped, chained: first -> unchanged rerun -> rerun after a human edit);
each fixture keeps what its run wrote, since the next run writes over the same folder.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from testcurator.agents.decision import Decision
from testcurator.pipelines.emit import entry_for

MODES = ("mandatory_success", "xfail", "xfail_strict", "skip")
HUMAN_MODE = "Human: flaky on our lab board since driver 2.3 (ticket CD-17); xfail until fixed."
HUMAN_NOTE = "Human: reviewed by the op team, keep mandatory."


@dataclass(frozen=True)
class Run:
    tree: Path
    out: Path
    rc: int
    configs: dict[str, bytes]  # relative path -> bytes, as the run left them
    saved: Path  # a copy of the configs folder as the run left it
    report: dict[str, Any]
    markdown: str
    entries: dict[str, Any]  # file::Class::test -> kit.Entry


def _run(kit: ModuleType, root: Path, tag: str) -> Run:
    tree, out = root / "upstream", root / "out"
    rc = kit.run_cli(tree, kit.EXAMPLE_BACKEND, out, root / "state", "--no-execute", "--no-embed", "--no-capture-ops")
    assert rc == 0, f"testcurator run exited {rc}"
    saved = root / f"configs-{tag}"
    shutil.copytree(out / "configs", saved)
    return Run(tree, out, rc, kit.config_bytes(out / "configs"), saved, kit.read_report(out),
               (out / "report.md").read_text(encoding="utf-8"), kit.entries(out / "configs", tree))


@pytest.fixture(scope="module")
def root(kit: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("nightly")
    kit.copy_example_tree(path / "upstream")
    return path


@pytest.fixture(scope="module")
def first(kit: ModuleType, root: Path) -> Run:
    return _run(kit, root, "first")


@pytest.fixture(scope="module")
def rerun(kit: ModuleType, root: Path, first: Run) -> Run:
    return _run(kit, root, "rerun")


def human_edit(text: str, test: str, comment: str, mode: str | None) -> str:
    """``text`` with the single-name entry of ``test`` given ``comment`` (replacing its
    comment lines) and, if given, ``mode``: what a reviewer does in an editor."""
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.strip() == f"- {test}")
    names = at - 1
    assert lines[names].strip() == "- names:", "entry with a single name expected"
    indent = lines[names][: len(lines[names]) - len(lines[names].lstrip())]
    top = names
    while lines[top - 1].strip().startswith("#"):
        top -= 1
    mode_at = next(i for i in range(at, len(lines)) if lines[i].strip().startswith("mode:"))
    if mode is not None:
        lines[mode_at] = re.sub(r"mode: \w+", f"mode: {mode}", lines[mode_at])
    return "".join(lines[:top] + [f"{indent}# {comment}\n"] + lines[names:])


@dataclass(frozen=True)
class Edited:
    before: Run  # the configs the human edited
    after: Run
    changed: str  # file::test whose mode and comment the human changed
    noted: str  # file::test whose comment only the human changed
    human_text: bytes  # the edited config file as the human saved it
    rel: str  # that config file, relative to configs/


@pytest.fixture(scope="module")
def edited(kit: ModuleType, root: Path, rerun: Run) -> Edited:
    """Change one mandatory_success entry to xfail with a new comment, and only the comment
    of another; then regenerate over the same (unchanged) inputs."""
    file = "test/test_view_ops.py"
    mandatory = sorted(k for k, e in rerun.entries.items() if e.file == file and e.mode == "mandatory_success")
    changed, noted = mandatory[0], mandatory[1]
    path = rerun.out / "configs" / "test" / "test_view_ops.yaml"
    text = path.read_text(encoding="utf-8")
    text = human_edit(text, changed.split("::", 1)[1], HUMAN_MODE, "xfail")
    text = human_edit(text, noted.split("::", 1)[1], HUMAN_NOTE, None)
    path.write_text(text, encoding="utf-8")
    return Edited(rerun, _run(kit, root, "edited"), changed, noted, text.encode(), "test/test_view_ops.yaml")


# --- the first run ---------------------------------------------------------------------
@pytest.mark.slow
def test_configs_validate(kit: ModuleType, first: Run) -> None:
    assert first.configs, "no configs written"
    assert kit.main(["validate", str(first.saved), "--torch-root", str(first.tree)]) == 0


def test_every_entry_has_its_reason_as_a_comment(first: Run) -> None:
    assert first.entries
    for key, entry in first.entries.items():
        assert entry.reason and entry.reason.endswith("[offline]"), key
    # In the YAML itself: a comment line right above every entry.
    yamls = {rel: data for rel, data in first.configs.items() if rel.endswith(".yaml")}
    assert yamls
    for rel, data in yamls.items():
        lines = data.decode().splitlines()
        starts = [i for i, line in enumerate(lines) if line.strip() == "- names:"]
        assert starts, rel
        assert all(lines[i - 1].strip().startswith("#") for i in starts), rel


def test_report_counts_match_the_configs(first: Run) -> None:
    by_file: dict[str, Counter[str]] = {}
    for entry in first.entries.values():
        by_file.setdefault(entry.file, Counter())[entry.mode] += 1
    report = first.report
    assert report["decided_by"] == "bucket"
    assert report["per_file"] == {f: dict(c) for f, c in by_file.items()}
    totals = sum(by_file.values(), Counter())
    assert report["totals"] == {m: totals.get(m, 0) for m in MODES}
    assert report["brains"] == {"offline": len(first.entries)}
    assert sorted(report["emit"]["written"]) == sorted(r for r in first.configs if r.endswith(".yaml"))
    # The markdown says the same.
    head = re.search(r"^- (\d+) tests decided \(bucket stage\): (.*)$", first.markdown, re.M)
    assert head is not None and int(head.group(1)) == len(first.entries)
    assert head.group(2) == ", ".join(f"{m} {totals.get(m, 0)}" for m in MODES)
    for rel, counts in by_file.items():
        config = f"configs/{rel.removesuffix('.py')}.yaml"
        row = f"| {rel} | [{config}]({config}) | " + " | ".join(str(counts.get(m, 0)) for m in MODES) + " |"
        assert row in first.markdown
    # The run's identity, and its command and exit code once the command ended.
    assert report["run"]["torch_version"] and report["run"]["upstream_revision"]
    assert report["run"]["command"].startswith("testcurator run --torch-root ") and report["run"]["exit_code"] == 0
    md = first.markdown
    assert md.index("| scope |") < md.index("| memory |") < md.index("| bucket |") < md.index("| emit |") < md.index("| **total** |")


def test_scope_drops_what_the_profile_does_not_hook(first: Run) -> None:
    scope = {s["path"]: s for s in first.report["scope"]}
    for dropped in ("test/distributed", "test/inductor", "test/onnx"):
        assert scope[dropped]["keep"] is False and scope[dropped]["reason"], dropped
    kept = {e.file for e in first.entries.values()}
    assert kept and not any(f.startswith(("test/distributed/", "test/inductor/", "test/onnx/")) for f in kept)
    assert all(scope[f]["keep"] for f in kept if f in scope)
    assert sorted(first.report["per_file"]) == sorted(kept)


# --- unchanged rerun --------------------------------------------------------------------
@pytest.mark.slow
def test_unchanged_rerun_changes_no_byte(first: Run, rerun: Run) -> None:
    assert rerun.configs == first.configs
    assert rerun.report["emit"] == {"written": [], "kept_human": [], "conflicts": [], "pending": []}
    assert rerun.report["totals"] == first.report["totals"]


# --- human edits --------------------------------------------------------------------------
@pytest.mark.slow
def test_human_edits_survive_regeneration(edited: Edited) -> None:
    after = edited.after
    changed = after.entries[edited.changed]
    assert changed.mode == "xfail" and changed.reason == HUMAN_MODE
    noted = after.entries[edited.noted]
    assert noted.mode == "mandatory_success" and noted.reason == HUMAN_NOTE
    # The pipeline left the human's file alone, byte for byte, and every other file too.
    assert after.configs == {**edited.before.configs, edited.rel: edited.human_text}
    assert after.report["emit"]["written"] == []


def test_report_lists_kept_human_edits(edited: Edited) -> None:
    emit = edited.after.report["emit"]
    assert sorted(emit["kept_human"]) == sorted([edited.changed, edited.noted])
    assert emit["conflicts"] == []  # nothing ran, so no evidence contradicts the human
    assert "Human edits kept (2)" in edited.after.markdown


def test_report_counts_match_the_configs_after_a_human_edit(edited: Edited) -> None:
    counts: dict[str, Counter[str]] = {}
    for entry in edited.after.entries.values():
        counts.setdefault(entry.file, Counter())[entry.mode] += 1
    assert edited.after.report["per_file"] == {f: dict(c) for f, c in counts.items()}




@pytest.mark.parametrize(("field", "value", "edit"), [
    ("exclude_dtypes", "float64", {"dtypes": {"exclude": [{"name": "float64"}]}}),
    ("exclude_ops", "sub", {"ops": {"exclude": [{"name": "sub"}]}}),
    pytest.param("exclude_modules", "nn.Linear", {"modules": {"exclude": [{"name": "nn.Linear"}]}}),
])
def test_every_exclusion_becomes_an_edit(field: str, value: str, edit: dict[str, Any]) -> None:
    decision = Decision("TestModule::test_forward", "mandatory_success", "why", (), "offline", None, **{field: (value,)})
    assert entry_for(decision).edits == edit


def test_one_uncollectable_file_does_not_stop_the_run(kit: ModuleType, tmp_path: Path) -> None:
    tree, backend = kit.write_small_tree(tmp_path)
    (tree / "test" / "test_needs_missing_dep.py").write_text(
        "import not_installed_anywhere_xyz\n\n\ndef test_never():\n    pass\n", encoding="utf-8")
    out = tmp_path / "out"
    assert kit.run_cli(tree, backend, out, tmp_path / "state", "--no-execute", "--no-embed", "--no-capture-ops") == 0
    assert "test/test_small_math.py::TestSmallMath::test_add_float" in kit.entries(out / "configs", tree)


def test_relative_state_and_out_dirs(kit: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The collect-only pass runs in the torch root: a relative --state-dir must not send its
    # capture file there (it did: "collecting 4 file(s) failed (pytest exit 0)").
    tree, backend = kit.write_small_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert kit.run_cli(tree, backend, Path("out"), Path("state"), "--no-execute", "--no-embed", "--no-capture-ops") == 0
    assert (tmp_path / "out" / "configs").is_dir() and (tmp_path / "state" / "runs").is_dir()
