from __future__ import annotations

from pathlib import Path

import pytest

from testcurator.memory.discover import discover_ops
from testcurator.errors import MissingPathError

CPP = """\
#include <torch/library.h>
namespace dev {
at::Tensor add_impl(const at::Tensor& a, const at::Tensor& b, const at::Scalar& s) { return a; }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.Tensor", &add_impl);
  m.impl(TORCH_SELECTIVE_NAME("aten::mul.Tensor"), TORCH_FN(add_impl));
}
}  // namespace dev
TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}
TORCH_LIBRARY_IMPL(aten, CUDA, m) { m.impl("sub.Tensor", &add_impl); }
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { m.impl("relu", relu_autograd); }
"""

PY = """\
import torch
from torch.library import Library, impl

lib = torch.library.Library("aten", "IMPL")
lib.impl("div.Tensor", div_kernel, "PrivateUse1")
lib.impl("cos", cos_kernel, dispatch_key="CPU")
other = Library("aten", "IMPL", "PrivateUse1")
other.impl("sin", sin_kernel)
other.fallback(fallback_fn, dispatch_key="PrivateUse1")

@torch.library.impl("aten::exp", "PrivateUse1")
def exp_kernel(x):
    return x

@impl("aten::log", ["curatedev", "cpu"])
def log_kernel(x):
    return x

torch.library.register_kernel(torch.ops.aten.abs.default, "curatedev", abs_kernel)
torch.library.register_kernel("aten::neg", "cuda", neg_kernel)
"""


@pytest.fixture
def backend(tmp_path: Path) -> Path:
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "ops.cpp").write_text(CPP)
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "ops.py").write_text(PY)
    (tmp_path / "dev" / "notes.txt").write_text('m.impl("ignored")')
    return tmp_path


def test_cpp_registrations(backend: Path) -> None:
    found = discover_ops([backend / "csrc"])
    assert found.ops() == {"aten::add.Tensor", "aten::mul.Tensor", "aten::relu"}
    assert found.has_fallback
    assert found.evidence("aten::add.Tensor") == [f"{backend / 'csrc' / 'ops.cpp'}:6:3: registers aten::add.Tensor (PrivateUse1)"]
    keys = {r.op: r.dispatch_key for r in found.registrations}
    assert keys["aten::relu"] == "AutogradPrivateUse1" and "aten::sub.Tensor" not in keys


def test_python_registrations(backend: Path) -> None:
    found = discover_ops([backend / "dev"], device="curatedev")
    assert found.ops() == {"aten::div.Tensor", "aten::sin", "aten::exp", "aten::log", "aten::abs"}
    assert found.has_fallback
    lines = {r.op: r.location.line for r in found.registrations}
    assert lines["aten::div.Tensor"] == 5 and lines["aten::abs"] == 19


def test_device_name_is_only_matched_when_given(backend: Path) -> None:
    assert "aten::log" not in discover_ops([backend / "dev"]).ops()


def test_missing_source_path(tmp_path: Path) -> None:
    with pytest.raises(MissingPathError):
        discover_ops([tmp_path / "nope"])
