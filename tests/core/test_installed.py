"""What the driver reads of torch without importing it agrees with torch imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testcurator import installed


def test_the_stubs_dtypes_are_the_dtypes_torch_defines() -> None:
    stub = installed.stub_dtype_names()
    assert {"float32", "bfloat16", "complex128", "bool", "uint16"} <= stub
    assert stub == installed.imported_dtype_names()


def test_the_version_file_says_what_torch_says() -> None:
    import torch

    assert installed.torch_version() == str(torch.__version__)
    assert installed.version_fields()["git_version"] == torch.version.git_version


def test_reading_them_imports_no_torch() -> None:
    code = ("import sys; from testcurator import installed; installed.dtype_names(); installed.torch_version(); "
            "from testcurator.config.profile import load_profile; "
            f"load_profile(__import__('pathlib').Path({str(EXAMPLE)!r})); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("stub", ["missing", "empty"])
def test_without_a_stub_the_names_come_from_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stub: str) -> None:
    folder = tmp_path / "torch"
    (folder / "_C").mkdir(parents=True)
    if stub == "empty":
        (folder / "_C" / "__init__.pyi").write_text("# no dtypes here\n")
    monkeypatch.setattr(installed, "torch_dir", lambda: folder)
    assert installed.stub_dtype_names() == frozenset()
    installed.dtype_names.cache_clear()
    try:
        assert installed.dtype_names() == installed.imported_dtype_names()
    finally:
        installed.dtype_names.cache_clear()


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "backend" / "backend.yaml"
