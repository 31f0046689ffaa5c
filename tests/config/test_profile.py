from __future__ import annotations

from pathlib import Path

import pytest

from testcurator.agents.brain import BackendContext
from testcurator.config.profile import HOOK_DESCRIPTIONS, HOOKS, BackendProfile, load_profile
from testcurator.errors import ConfigError, MissingPathError

GOOD = """\
schema_version: 1
name: curatedev
device: {kind: privateuse1, name: curatedev}
backend_module: curatedev_backend
hooks: [eager_ops, autograd]
preferences:
  - Views and in-place ops matter most.
source_paths: [csrc]
docs: [README.md]
supported_dtypes: [{name: float32}, {name: bfloat16}]
supported_ops:
  - name: add
  - name: matmul
    dtypes: [{name: float32}]
env: {CURATEDEV_ALLOW: "add"}
"""


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "csrc").mkdir(exist_ok=True)
    (tmp_path / "README.md").write_text("docs")
    path = tmp_path / "backend.yaml"
    path.write_text(text)
    return path


def test_valid_profile_and_its_context(tmp_path: Path) -> None:
    profile, paths = load_profile(write(tmp_path, GOOD))
    assert profile.hooks == ["eager_ops", "autograd"] and profile.device.torch_name == "curatedev"
    assert paths["source_paths"] == [(tmp_path / "csrc").resolve()]
    ctx = BackendContext.from_profile(profile, unsupported_ops=["aten::_scaled_mm"])
    assert ctx.hooks == ("eager_ops", "autograd") and ctx.supported_ops == {"add": None, "matmul": frozenset({"float32"})}
    assert ctx.dtype_unsupported("float64") and not ctx.dtype_unsupported("bfloat16")
    assert ctx.op_unsupported("sub") and not ctx.op_unsupported("add")
    assert ctx.op_unsupported("aten::_scaled_mm.default") and not ctx.op_unsupported("aten::sub.Tensor")


@pytest.mark.parametrize(("edit", "where", "message"), [
    (("hooks: [eager_ops, autograd]", "hooks: [eager_ops, warp_drive]"), ":5:", "warp_drive"),
    (("backend_module:", "backend_modul:"), ":4:", "unknown key 'backend_modul'"),
    (("{name: bfloat16}", "{name: bfloat17}"), ":10:", "bfloat17"),
    (("kind: privateuse1", "kind: quantum"), ":3:", "quantum"),
    (("hooks: [eager_ops, autograd]", "hooks: [autograd, autograd]"), ":5:", "listed twice"),
])
def test_bad_profiles_point_at_the_line(tmp_path: Path, edit: tuple[str, str], where: str, message: str) -> None:
    path = write(tmp_path, GOOD.replace(*edit))
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    text = str(info.value)
    assert str(path) + where in text and message in text


def test_missing_listed_path_is_positioned(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("source_paths: [csrc]", "source_paths: [csrc, gone]"))
    with pytest.raises(ConfigError, match=r"backend\.yaml:8:.*gone does not exist"):
        load_profile(path)
    assert load_profile(path, check_paths=False)[0].source_paths == ["csrc", "gone"]


def test_missing_profile(tmp_path: Path) -> None:
    with pytest.raises(MissingPathError):
        load_profile(tmp_path / "backend.yaml")


def test_every_hook_is_described() -> None:
    assert set(HOOK_DESCRIPTIONS) == set(HOOKS)
    assert "hooks" in BackendProfile.model_json_schema()["properties"]
