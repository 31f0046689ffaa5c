"""Upstream files that do not import are decided as a whole (issue 9, item 5).

The real case: upstream ``test/test_type_promotion.py`` imports ``onlyOnCPUAndCUDA``, a name
torch 2.13 no longer has, and once got 27 ``mandatory_success`` entries.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testcurator.agents.decision import Decision
from testcurator.config.loader import load_config
from testcurator.config.profile import BackendProfile
from testcurator.memory.stage import IMPORT_ERRORS, collect_static
from testcurator.pipelines import emit as emitter
from testcurator.pipelines.decide import file_reason
from testcurator.pipelines.validate_tree import level3

# Our own file in PyTorch's style, importing a decorator this torch does not have.
BROKEN = '''
import torch
from torch.testing._internal.common_utils import TestCase, run_tests
from torch.testing._internal.common_device_type import instantiate_device_type_tests, dtypes, onlyOnCPUAndNoSuchDevice


class TestPromotion(TestCase):
    @dtypes(torch.float32, torch.int64)
    def test_add(self, device, dtype):
        self.assertEqual((torch.ones(2, device=device, dtype=dtype) * 2).sum().item(), 4)


instantiate_device_type_tests(TestPromotion, globals())
'''
GOOD = BROKEN.replace(", onlyOnCPUAndNoSuchDevice", "").replace("TestPromotion", "TestFine")


def test_the_static_collection_names_the_files_that_do_not_import(tmp_path: Path) -> None:
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "test_broken.py").write_text(BROKEN, encoding="utf-8")
    (tmp_path / "test" / "test_fine.py").write_text(GOOD, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    out = collect_static(tmp_path, ["test/test_broken.py", "test/test_fine.py"], work / "static.jsonl", work / "static.log")
    errors = json.loads((work / IMPORT_ERRORS).read_text(encoding="utf-8"))
    assert list(errors) == ["test/test_broken.py"]
    assert errors["test/test_broken.py"].startswith("ImportError: cannot import name 'onlyOnCPUAndNoSuchDevice'")
    assert "TestFineCPU" in out.read_text(encoding="utf-8")  # the other file is collected as usual


PROFILE = BackendProfile.model_validate({"name": "dev", "device": {"kind": "privateuse1", "name": "dev"}})


def _emit(configs: Path, root: Path, decisions: list[Decision], sidecar: dict[str, dict[str, str]],
          reason: str | None) -> None:
    emitter.emit_file(configs, root, PROFILE, "test/test_broken.py", decisions, sidecar, set(), emitter.EmitResult(),
                      file_reason=reason, drop_stale=True)


def test_a_file_that_does_not_import_gets_one_file_level_skip(tmp_path: Path) -> None:
    root = tmp_path / "torch"
    (root / "test").mkdir(parents=True)
    (root / "test" / "test_broken.py").write_text(BROKEN, encoding="utf-8")
    configs, sidecar = tmp_path / "configs", {}
    # An earlier run, when the file imported, wrote per-test entries ...
    _emit(configs, root, [Decision("TestPromotion::test_add", "mandatory_success", "runs", (), "offline", None)],
          sidecar, None)
    # ... now it does not import: the file is decided as a whole.
    _emit(configs, root, [], sidecar, file_reason("ImportError: cannot import name 'onlyOnCPUAndNoSuchDevice'"))
    path = configs / "test" / "test_broken.yaml"
    loaded = load_config(path, torch_root=root)
    (entry,) = loaded.files
    assert entry.unlisted_test_mode == "skip" and entry.entries == ()
    text = path.read_text(encoding="utf-8")
    assert "NEEDS REVIEW: the whole file is skipped: it does not import (ImportError: cannot import name" in " ".join(
        line.lstrip("# ") for line in text.splitlines())
    assert "mandatory_success" not in text
    assert list(sidecar["test/test_broken.py"]) == [emitter.FILE_DECISION]  # the decision, no test entries
    # The tool agrees with itself (issue 22): validate --level 3 accepts the pipeline's own
    # file-level skip of a file that does not collect, with a note.
    checked = level3([path], torch_root=root)
    assert checked.problems == []
    assert any("test_broken.py does not collect" in n and "skips it as a whole" in n for n in checked.notes)


def test_a_file_that_imports_again_loses_its_file_level_skip(tmp_path: Path) -> None:
    root = tmp_path / "torch"
    (root / "test").mkdir(parents=True)
    (root / "test" / "test_broken.py").write_text(GOOD, encoding="utf-8")
    configs, sidecar = tmp_path / "configs", {}
    _emit(configs, root, [], sidecar, file_reason("ImportError: cannot import name 'onlyOnCPUAndNoSuchDevice'"))
    # It imports again: its tests are decided one by one, and the header no longer says otherwise.
    _emit(configs, root, [Decision("TestFine::test_add", "mandatory_success", "runs", (), "offline", None)], sidecar, None)
    text = (configs / "test" / "test_broken.yaml").read_text(encoding="utf-8")
    assert "does not import" not in text and "TestFine::test_add" in text
    assert sidecar["test/test_broken.py"].keys() == {"TestFine::test_add"}


def test_a_file_with_nothing_to_change_is_not_edited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "torch"
    (root / "test").mkdir(parents=True)
    (root / "test" / "test_broken.py").write_text(GOOD, encoding="utf-8")
    configs, sidecar = tmp_path / "configs", {}
    decisions = [Decision("TestFine::test_add", "mandatory_success", "runs", (), "offline", None)]
    _emit(configs, root, decisions, sidecar, None)

    def no_editor(path: Path) -> None:
        raise AssertionError(f"opened an editor on {path} with nothing to change")

    # The same decisions again (a delta run whose re-evaluated tests keep their decisions):
    # no round-trip parse of the config.
    monkeypatch.setattr(emitter.ConfigEditor, "open", no_editor)
    result = emitter.EmitResult()
    emitter.emit_file(configs, root, PROFILE, "test/test_broken.py", decisions, sidecar, set(), result, drop_stale=False)
    assert result.written == []
