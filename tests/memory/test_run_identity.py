"""The backend's digest (memory/run_identity.py) follows its installed module wherever the
interpreter finds it: an editable install's own finder included (OpenReg's build.sh installs
it with ``pip install -e``, and a night after it lost a kernel once looked unchanged)."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import pytest

from testcurator.config.profile import BackendProfile
from testcurator.memory.run_identity import backend_digest, module_files


class _EditableFinder(importlib.abc.MetaPathFinder):
    """What an editable install puts on ``sys.meta_path``: one package, mapped to its folder."""

    def __init__(self, name: str, folder: Path) -> None:
        self.name, self.folder = name, folder

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        return importlib.util.spec_from_file_location(fullname, self.folder / "__init__.py",
                                                      submodule_search_locations=[str(self.folder)])


def test_an_editable_backend_is_digested_and_a_changed_kernel_changes_the_digest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "elsewhere" / "tc_editable_backend"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("KERNELS = ['topk']\n")
    monkeypatch.setattr(sys, "meta_path", [_EditableFinder("tc_editable_backend", package), *sys.meta_path])
    profile_path = tmp_path / "backend.yaml"
    profile_path.write_text("name: x\n")
    profile = BackendProfile(name="x", device={"kind": "privateuse1", "name": "xdev"}, backend_module="tc_editable_backend")
    assert module_files(profile, profile_path) == [package / "__init__.py"]
    before = backend_digest(profile, profile_path, [], {})
    (package / "__init__.py").write_text("KERNELS = []  # the night it lost topk\n")
    assert backend_digest(profile, profile_path, [], {}) != before
    assert "tc_editable_backend" not in sys.modules  # found, not imported
