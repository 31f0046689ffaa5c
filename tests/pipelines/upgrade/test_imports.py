"""`testcurator upgrade` across files that stop importing, and import again (issue 9, item 5).

A file that does not import is decided as a whole (one file-level skip, the collection error
as the reason, no per-test entries), in an upgrade as in a full run; once it imports again
its tests are bucketed like any other and the file-level skip goes.
"""

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
from testcurator.config.loader import load_config
from testcurator.pipelines.emit import FILE_DECISION, load_sidecar
from testcurator.runner.warm import WarmPytest

# Our own file in PyTorch's style (device-generic); beside it the small tree's plain TestCase file.
PROMO = '''\
import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase, run_tests


class TestPromo(TestCase):
    @dtypes(torch.float32, torch.int64)
    def test_add_promotes(self, device, dtype):
        x = torch.ones(2, device=device, dtype=dtype)
        self.assertEqual((x + x).sum().item(), 4)

    def test_mul_scalar(self, device):
        self.assertEqual((torch.ones(3, device=device) * 2).sum().item(), 6)


instantiate_device_type_tests(TestPromo, globals())

if __name__ == "__main__":
    run_tests()
'''
A, B = "test/test_promo.py", "test/test_small_views.py"
A_TESTS = {"TestPromo::test_add_promotes", "TestPromo::test_mul_scalar"}
MISSING = "onlyOnCPUAndNoSuchDevice"  # a decorator this torch does not have
NO_RUN = ("--no-execute", "--no-embed")


def broken(text: str, *, change_a_test: bool) -> str:
    """The file importing a name torch lacks (version skew); optionally one test changed too."""
    text = text.replace("import dtypes, instantiate_device_type_tests",
                        f"import dtypes, instantiate_device_type_tests, {MISSING}")
    return text.replace("* 2).sum().item(), 6)", "* 3).sum().item(), 9)") if change_a_test else text


def write_tree(root: Path, promo: str, plain: str) -> Path:
    (root / "test").mkdir(parents=True)
    (root / A).write_text(promo, encoding="utf-8")
    (root / B).write_text(plain, encoding="utf-8")
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n", encoding="utf-8")
    return root


def upgrade(old: Path, new: Path, config: Path, out: Path, backend: Path, state: Path, *extra: str) -> dict[str, Any]:
    """The upgrade's report, with the tests its delta run bucketed (file::test) under ``bucketed``."""
    before = set((state / "runs").glob("upgrade-*"))
    rc = main(["upgrade", "--old-root", str(old), "--new-root", str(new), "--config", str(config), "--out", str(out),
               "--backend", str(backend), "--state-dir", str(state), *NO_RUN, *extra])
    assert rc == 0
    (run,) = set((state / "runs").glob("upgrade-*")) - before
    decided = set()
    for path in (run / "bucket").glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        decided |= {f"{data['file']}::{d['test']}" for d in data["decisions"]}
    return {**json.loads((out / "upgrade.json").read_text(encoding="utf-8")), "bucketed": decided}


def names(configs: Path, tree: Path, rel: str) -> set[str]:
    loaded = load_config(configs, torch_root=tree)
    return {n for f in loaded.files if f.raw_path.endswith(rel) for e in f.entries for n in e.names}


def header(configs: Path, rel: str) -> str:
    text = (configs / rel.replace(".py", ".yaml")).read_text(encoding="utf-8")
    return " ".join(line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))


@dataclass(frozen=True)
class Chain:
    old: Path  # imports
    broken: Path  # A does not import
    fixed: Path  # A imports again
    first: Path  # configs of a full run over old
    stop: dict[str, Any]  # upgrade old -> broken
    stop_out: Path
    again: dict[str, Any]  # upgrade broken -> fixed
    again_out: Path
    state: Path


@pytest.fixture(scope="module", params=[
    pytest.param((True, ()), id="changed-test+capture"),
    pytest.param((False, ("--no-capture-ops",)), id="import-line-only+static"),
])
def chain(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, kit: ModuleType) -> Iterator[Chain]:
    change_a_test, extra = request.param
    root = tmp_path_factory.mktemp("imports")
    backend = root / "backend.yaml"
    backend.write_text(kit.SMALL_BACKEND, encoding="utf-8")
    old = write_tree(root / "old", PROMO, kit.SMALL_VIEWS)
    bad = write_tree(root / "broken", broken(PROMO, change_a_test=change_a_test), kit.SMALL_VIEWS)
    # Fixed upstream: the import is gone again, and the test stays as the broken tree has it.
    fixed = write_tree(root / "fixed", broken(PROMO, change_a_test=change_a_test).replace(f", {MISSING}", ""),
                       kit.SMALL_VIEWS)
    state = root / "state"
    assert main(["run", "--torch-root", str(old), "--backend", str(backend), "--out", str(root / "first"),
                 "--state-dir", str(state), *NO_RUN, "--no-capture-ops"]) == 0
    stop = upgrade(old, bad, root / "first" / "configs", root / "stop", backend, state, *extra)
    again = upgrade(bad, fixed, root / "stop" / "configs", root / "again", backend, state, *extra)
    yield Chain(old, bad, fixed, root / "first" / "configs", stop, root / "stop", again, root / "again", state)
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_the_full_run_curated_the_file_per_test(chain: Chain) -> None:
    assert names(chain.first, chain.old, A) == A_TESTS  # what the upgrade starts from


def test_a_file_that_stopped_importing_gets_one_file_level_skip(chain: Chain) -> None:
    configs = chain.stop_out / "configs"
    assert list(chain.stop["imports"]["stopped"]) == [A]
    assert chain.stop["imports"]["stopped"][A].startswith(f"ImportError: cannot import name '{MISSING}'")
    assert names(configs, chain.broken, A) == set()  # no per-test entries
    (file,) = [f for f in load_config(configs, torch_root=chain.broken).files if f.raw_path.endswith(A)]
    assert file.unlisted_test_mode == "skip"
    assert f"NEEDS REVIEW: the whole file is skipped: it does not import (ImportError: cannot import name '{MISSING}'" \
        in header(configs, A)
    assert load_sidecar(configs)[A] == {FILE_DECISION: load_sidecar(configs)[A][FILE_DECISION]}
    assert chain.stop["bucketed"] == set()  # nothing of it decided per test
    # The other file is untouched, byte for byte.
    assert (configs / B.replace(".py", ".yaml")).read_bytes() == (chain.first / B.replace(".py", ".yaml")).read_bytes()
    md = (chain.stop_out / "upgrade.md").read_text(encoding="utf-8")
    assert "## Files that stopped importing: skipped as a whole, needs review (1)" in md and f"- `{A}`: ImportError" in md


def test_a_file_that_imports_again_is_bucketed_like_any_other(chain: Chain) -> None:
    configs = chain.again_out / "configs"
    assert chain.again["imports"]["again"] == [A] and chain.again["imports"]["stopped"] == {}
    assert chain.again["bucketed"] == {f"{A}::{t}" for t in A_TESTS}  # every test of it, nothing else
    assert names(configs, chain.fixed, A) == A_TESTS
    assert "does not import" not in header(configs, A)
    assert FILE_DECISION not in load_sidecar(configs).get(A, {})
    assert chain.again["evaluated"] == f"evaluated {len(A_TESTS)} of {len(A_TESTS) + 2} tests"
    assert f"## Files that import again: their tests evaluated (1)\n\n- `{A}`" in (
        chain.again_out / "upgrade.md").read_text(encoding="utf-8")



@pytest.mark.slow
def test_the_delta_runs_only_its_tests_instances_on_the_device(tmp_path: Path, kit: ModuleType,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # test_add_promotes changes; test_add_promotes_twice shares its prefix (``-k`` kept it).
    twice = PROMO.replace("    def test_mul_scalar", "    @dtypes(torch.float32)\n"
                          "    def test_add_promotes_twice(self, device, dtype):\n"
                          "        self.assertEqual(torch.ones(1, device=device, dtype=dtype).sum().item(), 1)\n\n"
                          "    def test_mul_scalar")
    old = write_tree(tmp_path / "old", twice, kit.SMALL_VIEWS)
    new = write_tree(tmp_path / "new", twice.replace("(x + x).sum().item(), 4)", "(x * 2).sum().item(), 4)"),
                     kit.SMALL_VIEWS)
    state = tmp_path / "state"
    assert main(["run", "--torch-root", str(old), "--backend", str(kit.EXAMPLE_BACKEND), "--out", str(tmp_path / "first"),
                 "--state-dir", str(state), "--no-embed", "--no-capture-ops", "--no-execute"]) == 0
    warm_runs: list[list[str]] = []
    original = WarmPytest.run

    def run(self: WarmPytest, argv: list[str], log: Path) -> int:
        warm_runs.append(list(argv))
        return original(self, argv, log)

    monkeypatch.setattr(WarmPytest, "run", run)
    rc = main(["upgrade", "--old-root", str(old), "--new-root", str(new), "--config", str(tmp_path / "first" / "configs"),
               "--out", str(tmp_path / "up"), "--backend", str(kit.EXAMPLE_BACKEND), "--state-dir", str(state),
               "--no-embed"])
    assert rc == 0
    # The capture ran in the pytest the upgrade started while it compared the trees.
    assert len(warm_runs) == 1 and any(a.startswith("--curate-capture-ops=") for a in warm_runs[0])
    data = json.loads((tmp_path / "up" / "upgrade.json").read_text(encoding="utf-8"))
    assert data["changed"] == [f"{A}::TestPromo::test_add_promotes"] and data["executed"]
    (run,) = (state / "runs").glob("upgrade-*")
    ran = [json.loads(line)["nodeid"] for line in (run / "exec" / "results.jsonl").read_text().splitlines()]
    assert sorted(n.split("::")[-1] for n in ran) == ["test_add_promotes_curatedev_float32",
                                                      "test_add_promotes_curatedev_int64"]
    captured = [json.loads(line)["nodeid"] for line in (run / "captured.jsonl").read_text().splitlines()]
    assert sorted(n.split("::")[-1] for n in captured) == ["test_add_promotes_cpu_float32", "test_add_promotes_cpu_int64"]
