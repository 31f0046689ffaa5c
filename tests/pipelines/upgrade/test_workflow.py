"""`testcurator upgrade`: the delta by content hash, and a delta run that touches nothing else."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from testcurator.cli.main import main
from testcurator.pipelines.upgrade.delta import Move, classify

# ---------------------------------------------------------------------------------------
# classify: file::generic -> content hash, old and new.
CASES = [
    ("unchanged", {"a.py::T::t": "h1"}, {"a.py::T::t": "h1"},
     {"unchanged": ("a.py::T::t",)}),
    ("changed", {"a.py::T::t": "h1"}, {"a.py::T::t": "h2"}, {"changed": ("a.py::T::t",)}),
    ("added", {}, {"a.py::T::t": "h1"}, {"added": ("a.py::T::t",)}),
    ("removed", {"a.py::T::t": "h1"}, {}, {"removed": ("a.py::T::t",)}),
    ("renamed", {"a.py::T::t": "h1"}, {"a.py::T::u": "h1"}, {"moved": (Move("a.py::T::t", "a.py::T::u"),)}),
    ("moved", {"a.py::T::t": "h1"}, {"b.py::T::t": "h1"}, {"moved": (Move("a.py::T::t", "b.py::T::t"),)}),
    # A copy of a test that still exists is new work, not a move.
    ("copied", {"a.py::T::t": "h1"}, {"a.py::T::t": "h1", "a.py::T::u": "h1"},
     {"unchanged": ("a.py::T::t",), "added": ("a.py::T::u",)}),
    # Two tests gone with one body: the one keeping its name elsewhere is the moved one.
    ("ambiguous", {"a.py::T::t": "h1", "a.py::T::u": "h1"}, {"b.py::T::u": "h1"},
     {"moved": (Move("a.py::T::u", "b.py::T::u"),), "removed": ("a.py::T::t",)}),
]


@pytest.mark.parametrize("old,new,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_classify(old: dict[str, str], new: dict[str, str], expected: dict[str, Any]) -> None:
    delta = classify(old, new)
    for name in ("unchanged", "changed", "added", "moved", "removed"):
        assert getattr(delta, name) == expected.get(name, ()), name
    assert delta.total == len(new)
    assert delta.evaluate == frozenset(expected.get("changed", ()) + expected.get("added", ()))


def test_move_kind() -> None:
    assert Move("a.py::T::t", "a.py::T::u").kind == "renamed"
    assert Move("a.py::T::t", "b.py::T::t").kind == "moved"


# ---------------------------------------------------------------------------------------
# The small tree (tests/pipelines/conftest.py), upgraded to a modified copy.
MATH, VIEWS, MORE = "test/test_small_math.py", "test/test_small_views.py", "test/test_small_more.py"
FAST = ("--no-execute", "--no-embed", "--no-capture-ops")
HUMAN = "HUMAN: decided by hand, keep."


def mutate(old: Path, new: Path) -> None:
    """changed: test_zeros_sum; added: test_flatten; removed: test_reshape_numel;
    renamed: test_add_float -> test_add_float32; moved: test_view_shares_storage -> MORE."""
    shutil.copytree(old, new)
    math = (new / MATH).read_text(encoding="utf-8")
    math = math.replace("torch.zeros(4, device=device).sum().item(), 0)", "torch.zeros(5, device=device).sum().item(), 0)")
    math = math.replace("def test_add_float(", "def test_add_float32(")
    (new / MATH).write_text(math, encoding="utf-8")
    views = (new / VIEWS).read_text(encoding="utf-8")
    moved = views[views.index("    def test_view_shares_storage"):views.index("    def test_reshape_numel")]
    removed = views[views.index("    def test_reshape_numel"):views.index("\n\nif __name__")]
    views = views.replace(moved, "").replace(removed, "    def test_flatten(self):\n"
                                                       "        self.assertEqual(torch.ones(2, 3).flatten().numel(), 6)\n")
    (new / VIEWS).write_text(views, encoding="utf-8")
    (new / MORE).write_text("import torch\nfrom torch.testing._internal.common_utils import TestCase, run_tests\n\n\n"
                            "class TestSmallViews(TestCase):\n" + moved + "\nif __name__ == '__main__':\n    run_tests()\n",
                            encoding="utf-8")


def human_edit(configs: Path, rel_yaml: str, test: str, mode: str) -> None:
    """Change an entry's mode and comment, as a reviewer would."""
    path = configs / rel_yaml
    lines = path.read_text(encoding="utf-8").splitlines()
    at = lines.index(f"            - {test}")
    start = at - 1
    while lines[start - 1].lstrip().startswith("#"):
        start -= 1
    lines[start:at - 1] = [f"        # {HUMAN}"]
    at = lines.index(f"            - {test}")
    assert lines[at + 1].strip().startswith("mode:")
    lines[at + 1] = f"          mode: {mode}"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@dataclass(frozen=True)
class Upgraded:
    old_tree: Path
    new_tree: Path
    old_configs: Path
    out: Path
    state: Path
    rc: int
    data: dict[str, Any]


def _upgrade(old: Path, new: Path, config: Path, backend: Path, out: Path, state: Path, *extra: str) -> int:
    """``testcurator upgrade`` in this process; what it wrote must pass validate levels 1-2
    against the new tree (the tool agrees with itself, issue 22)."""
    from testcurator.config.levels import level2_problems

    code = main(["upgrade", "--old-root", str(old), "--new-root", str(new), "--config", str(config), "--out", str(out),
                 "--backend", str(backend), "--state-dir", str(state), *extra])
    written = out / "configs"
    if code in (0, 1) and any(written.rglob("*.yaml")):
        problems = level2_problems([written], torch_root=new)
        assert not problems, "upgrade's configs fail validate --level 2:\n" + "\n".join(map(str, problems))
    return code


@pytest.fixture(scope="module")
def upgraded(kit: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upgraded]:
    root = tmp_path_factory.mktemp("upgrade")
    tree, backend = kit.write_small_tree(root)
    state, first = root / "state", root / "first"
    assert kit.run_cli(tree, backend, first, state, *FAST) == 0
    old_configs = root / "old-configs"
    shutil.copytree(first / "configs", old_configs)
    human_edit(old_configs, "test/test_small_math.yaml", "TestSmallMath::test_mul_matches_cpu", "xfail")  # unchanged test
    human_edit(old_configs, "test/test_small_math.yaml", "TestSmallMath::test_zeros_sum", "skip")  # changed test
    new = root / "new"
    mutate(tree, new)
    out = root / "out"
    rc = _upgrade(tree, new, old_configs, backend, out, state, *FAST)
    data = json.loads((out / "upgrade.json").read_text(encoding="utf-8")) if rc == 0 else {}
    yield Upgraded(tree, new, old_configs, out, state, rc, data)


@pytest.mark.slow
def test_delta_classes(upgraded: Upgraded) -> None:
    assert upgraded.rc == 0
    d = upgraded.data
    assert d["changed"] == [f"{MATH}::TestSmallMath::test_zeros_sum"]
    assert d["added"] == [f"{VIEWS}::TestSmallViews::test_flatten"]
    assert d["removed"] == [f"{VIEWS}::TestSmallViews::test_reshape_numel"]
    assert {(m["old"], m["new"], m["kind"]) for m in d["moved"]} == {
        (f"{MATH}::TestSmallMath::test_add_float", f"{MATH}::TestSmallMath::test_add_float32", "renamed"),
        (f"{VIEWS}::TestSmallViews::test_view_shares_storage", f"{MORE}::TestSmallViews::test_view_shares_storage", "moved")}
    assert d["counts"] == {"unchanged": 1, "changed": 1, "added": 1, "moved": 2, "removed": 1, "evaluated": 2, "total": 5}
    assert d["evaluated"] == "evaluated 2 of 5 tests"
    assert "**evaluated 2 of 5 tests**" in (upgraded.out / "upgrade.md").read_text(encoding="utf-8")


def test_only_the_delta_was_bucketed(upgraded: Upgraded) -> None:
    runs = sorted((upgraded.state / "runs").glob("upgrade-*"))
    assert len(runs) == 1
    decided = set()
    for path in (runs[0] / "bucket").glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        decided |= {f"{data['file']}::{d['test']}" for d in data["decisions"]}
    assert decided == set(upgraded.data["changed"]) | set(upgraded.data["added"])
    # An upgrade run is not what `run --resume` continues.
    latest = json.loads((upgraded.state / "runs" / "latest.json").read_text(encoding="utf-8"))
    assert "nightly-" in latest["thread_id"]


def test_everything_else_is_carried_over(kit: ModuleType, upgraded: Upgraded) -> None:
    before = kit.entries(upgraded.old_configs, upgraded.old_tree)
    after = kit.entries(upgraded.out / "configs", upgraded.new_tree)
    d = upgraded.data
    moved = {m["old"]: m["new"] for m in d["moved"]}
    carried = 0
    for key, entry in before.items():
        if key in d["removed"]:
            assert key not in after, key
        elif key in moved:
            new = after[moved[key]]
            assert (new.mode, key not in after) == (entry.mode, True)
            assert new.reason.startswith(entry.reason) and f"Carried over from {key}" in new.reason
        elif key not in d["changed"]:
            assert (after[key].mode, after[key].reason) == (entry.mode, entry.reason), key
            carried += 1
    assert moved and carried  # both kinds of carrying over were checked
    # Human edits: the unchanged test's and the changed (re-evaluated) test's both stand.
    for test, mode in (("test_mul_matches_cpu", "xfail"), ("test_zeros_sum", "skip")):
        entry = after[f"{MATH}::TestSmallMath::{test}"]
        assert (entry.mode, entry.reason) == (mode, HUMAN)
    assert d["emit"]["kept_human"] == [f"{MATH}::TestSmallMath::test_zeros_sum"]
    added = after[f"{VIEWS}::TestSmallViews::test_flatten"]
    assert added.reason and "[offline]" in added.reason


def test_human_bytes_are_kept(upgraded: Upgraded) -> None:
    old = (upgraded.old_configs / "test/test_small_math.yaml").read_text(encoding="utf-8")
    new = (upgraded.out / "configs/test/test_small_math.yaml").read_text(encoding="utf-8")
    block = old[old.index(f"        # {HUMAN}"):]
    block = block[:block.index("TestSmallMath::test_mul_matches_cpu")]
    assert block in new


def test_rerun_full_pipeline_keeps_upgrade_decisions(kit: ModuleType, upgraded: Upgraded, tmp_path: Path) -> None:
    # The carried-over sidecar lets a later nightly own what the pipeline wrote, and keep the rest.
    out = tmp_path / "again"
    shutil.copytree(upgraded.out / "configs", out / "configs")
    backend = upgraded.old_tree.parent / "backend" / "backend.yaml"
    assert kit.run_cli(upgraded.new_tree, backend, out, tmp_path / "state", *FAST) == 0
    after = kit.entries(out / "configs", upgraded.new_tree)
    assert after[f"{MATH}::TestSmallMath::test_zeros_sum"].reason == HUMAN
    assert f"{VIEWS}::TestSmallViews::test_reshape_numel" not in after


def test_no_delta_runs_no_stage(kit: ModuleType, upgraded: Upgraded, tmp_path: Path) -> None:
    backend = upgraded.old_tree.parent / "backend" / "backend.yaml"
    out = tmp_path / "same"
    rc = _upgrade(upgraded.new_tree, upgraded.new_tree, upgraded.out / "configs", backend, out, tmp_path / "st", *FAST)
    assert rc == 0
    data = json.loads((out / "upgrade.json").read_text(encoding="utf-8"))
    assert data["evaluated"] == "evaluated 0 of 5 tests"
    assert kit.config_bytes(out / "configs") == kit.config_bytes(upgraded.out / "configs")
    assert not (tmp_path / "st" / "runs").exists() or not list((tmp_path / "st" / "runs").glob("upgrade-*"))


def test_bad_input_exits_2(upgraded: Upgraded, tmp_path: Path) -> None:
    backend = upgraded.old_tree.parent / "backend" / "backend.yaml"
    assert _upgrade(tmp_path / "nope", upgraded.new_tree, upgraded.old_configs, backend, tmp_path / "o", tmp_path / "s") == 2
    assert _upgrade(upgraded.old_tree, upgraded.new_tree, tmp_path / "nope", backend, tmp_path / "o", tmp_path / "s") == 2


@pytest.mark.slow
def test_llm_is_asked_about_the_delta_only(kit: ModuleType, llm_server: Any, tmp_path: Path) -> None:
    tree, backend = kit.write_small_tree(tmp_path)
    state, first = tmp_path / "state", tmp_path / "first"
    llm_server.reset(kit.Policy())
    with pytest.MonkeyPatch.context() as mp:
        kit.fast_llm_settings(mp)
        llm = ("--brain", "llm", "--llm-base-url", llm_server.base_url, "--llm-model", "fake-upgrade")
        assert kit.run_cli(tree, backend, first, state, *FAST, *llm) == 0
        mutate(tree, tmp_path / "new")
        before = len(llm_server.requests)
        assert _upgrade(tree, tmp_path / "new", first / "configs", backend, tmp_path / "out", state, *FAST, *llm) == 0
    asked: list[str] = []
    for body, kind in zip(llm_server.requests[before:], llm_server.kinds[before:]):
        if kind == "BucketAnswer":
            user = next(m["content"] for m in body["messages"] if m["role"] == "user")
            asked += [item["test"] for item in json.loads(kit._SECTIONS[kind].search(user).group(1))]
    assert sorted(asked) == ["TestSmallMath::test_zeros_sum", "TestSmallViews::test_flatten"]
    data = json.loads((tmp_path / "out" / "upgrade.json").read_text(encoding="utf-8"))
    assert data["usage"]["calls"] == len(llm_server.requests) - before


def test_a_trees_own_op_db_changes_its_ops_tests(tmp_path: Path) -> None:
    from testcurator.pipelines.upgrade.workflow import hashes, opinfo_digest

    (tmp_path / "t" / "test").mkdir(parents=True)
    (tmp_path / "t" / "test" / "test_x.py").write_text(
        "from torch.testing._internal.common_device_type import ops\n"
        "from torch.testing._internal.common_methods_invocations import op_db\n"
        "from torch.testing._internal.common_utils import TestCase\n\n\n"
        "class TestX(TestCase):\n    @ops(op_db)\n    def test_o(self, device, dtype, op):\n        pass\n\n"
        "    def test_plain(self):\n        pass\n", encoding="utf-8")
    root = tmp_path / "t"
    assert opinfo_digest(root) is None
    plain = hashes(root, ["test/test_x.py"], tmp_path / "s")
    db = root / "torch" / "testing" / "_internal" / "common_methods_invocations.py"
    db.parent.mkdir(parents=True)
    db.write_text("op_db = ['add']\n", encoding="utf-8")
    first = hashes(root, ["test/test_x.py"], tmp_path / "s")
    db.write_text("op_db = ['add', 'mul']\n", encoding="utf-8")
    second = hashes(root, ["test/test_x.py"], tmp_path / "s")
    ops, other = "test/test_x.py::TestX::test_o", "test/test_x.py::TestX::test_plain"
    assert first[other] == second[other] == plain[other]
    assert len({plain[ops], first[ops], second[ops]}) == 3
    assert classify(first, second).changed == (ops,)
