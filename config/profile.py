"""The backend profile (``backend.yaml``): who the backend is and what it hooks.

The profile is the pipeline's second input beside the upstream tree. Stage 1 (scope) reads
``hooks`` and ``preferences``; stage 3 (bucket) reads the declared capabilities and the
ops discovered in ``source_paths`` (memory/discover.py). Example::

    schema_version: 1
    name: curatedev
    device: {kind: privateuse1, name: curatedev}
    backend_module: curatedev_backend      # imported to register the device
    hooks: [eager_ops, autograd]
    preferences:
      - "Views and in-place ops matter most; ignore sparse for now."
    source_paths: [csrc/, curatedev_backend/]
    docs: [README.md]
    supported_dtypes: [{name: float32}, {name: bfloat16}]
    supported_ops: [{name: add}, {name: matmul, dtypes: [{name: float32}]}]
    env: {CURATEDEV_ALLOW_OPS: "add,mul"}
    resources: {curatedev: 1}             # what a shard asks of a Ray node (--executor ray)

Validated like the config (unknown keys are errors, reported as ``file:line:col``).
Relative paths resolve against the profile's folder.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from testcurator.config.schema import DtypeRef, OpRef
from testcurator.errors import ConfigError, MissingPathError, Problem

PROFILE_SCHEMA_VERSION = 1


# Extension points a backend can implement; each maps to parts of the test tree. A Literal
# rather than an Enum: the loader's error for a bad value then names the value and the set.
Hook = Literal["eager_ops", "autograd", "compile", "inductor", "distributed", "sparse", "quantized", "complex",
               "nested", "jit", "export", "onnx", "amp", "fft", "linalg", "random", "serialization", "profiler"]
HOOKS: tuple[str, ...] = get_args(Hook)


# Plain-language meaning of each hook: shown to the scope brain, and documentation.
HOOK_DESCRIPTIONS: dict[str, str] = {
    "eager_ops": "ATen operator kernels run eagerly on the device (OpInfo tests, test_ops, test_torch, views)",
    "autograd": "backward kernels and AutogradPrivateUse1 registrations (test_autograd, gradcheck in OpInfo tests)",
    "compile": "torch.compile / TorchDynamo tracing on the device (test/dynamo)",
    "inductor": "a TorchInductor backend generating device code (test/inductor)",
    "distributed": "collectives via a c10d ProcessGroup backend (test/distributed)",
    "sparse": "sparse COO/CSR tensor layouts (test_sparse*.py)",
    "quantized": "quantized tensors and kernels (test/quantization)",
    "complex": "complex dtypes (complex64, complex128)",
    "nested": "nested / jagged tensors (test_nestedtensor.py)",
    "jit": "TorchScript (test/jit, test_jit*.py)",
    "export": "torch.export graphs (test/export)",
    "onnx": "ONNX export (test/onnx)",
    "amp": "autocast / mixed precision (AutocastPrivateUse1, test_autocast)",
    "fft": "torch.fft operators (test_spectral_ops.py)",
    "linalg": "torch.linalg operators (test_linalg.py)",
    "random": "random number generators and distributions (torch.Generator on the device)",
    "serialization": "torch.save/load of device tensors (test_serialization.py)",
    "profiler": "profiler integration (test/profiler)",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeviceSpec(_Strict):
    kind: Literal["privateuse1", "cpu", "cuda", "xpu", "mps", "hpu", "mtia", "meta"] = Field(
        description="How the backend plugs into PyTorch; out-of-tree backends are privateuse1.")
    name: str | None = Field(default=None, description="The device type name in torch (rename_privateuse1_backend); defaults to kind.")

    @property
    def torch_name(self) -> str:
        return self.name or self.kind


class FlakyPolicy(_Strict):
    """What a nightly does with a test whose outcome changes between runs with nothing changed."""

    policy: Literal["keep", "quarantine"] = Field(
        default="keep", description="keep: the test keeps its mode and is reported flaky with its timeline; quarantine: "
        "after `flips` changes of outcome it becomes a non-strict xfail, with its timeline as the reason.")
    flips: int = Field(default=2, ge=1, description="Changes of outcome (pass to fail or back) before quarantine.")


class BackendProfile(_Strict):
    schema_version: Literal[1] = PROFILE_SCHEMA_VERSION
    name: str = Field(min_length=1, description="The backend's name, used in reports and labels.")
    device: DeviceSpec
    backend_module: str | None = Field(
        default=None,
        description="What registers the device before tests are collected: MODULE, or MODULE:FUNCTION to also call FUNCTION().",
    )
    python_path: list[str] = Field(default_factory=list, description="Folders (relative to this file) that make backend_module importable.")
    hooks: list[Hook] = Field(default_factory=list, description="Extension points the backend implements.")
    preferences: list[str] = Field(default_factory=list, description="Plain-language wishes, read by the scope stage.")
    source_paths: list[str] = Field(default_factory=list, description="The backend's source (C++ and Python), for op discovery.")
    docs: list[str] = Field(default_factory=list, description="The backend's documentation files or folders.")
    supported_dtypes: list[DtypeRef] | None = Field(default=None, description="Declared dtypes; absent means not declared.")
    supported_ops: list[OpRef] | None = Field(default=None, description="Declared ops (OpInfo names); absent means not declared.")
    discover_ops: bool = Field(default=True, description="Find registered ops in source_paths (TORCH_LIBRARY_IMPL, torch.library).")
    env: dict[str, str] = Field(default_factory=dict, description="Environment for test runs (e.g. the backend's op allowlist).")
    digest_env: list[str] | None = Field(
        default=None,
        description="Environment variables (glob patterns) that change what the backend does, such as its op "
        "allowlist: their values are part of the backend digest, which tells a backend change from a flaky test. "
        "Default: the device name in capitals and '_*' (CURATEDEV_*).")
    flaky: FlakyPolicy = Field(default_factory=FlakyPolicy, description="Tests flaky across nights (see FlakyPolicy).")
    resources: dict[str, float] = Field(
        default_factory=dict,
        description="What one test shard needs of a host, as Ray custom resources (e.g. {curatedev: 1}): "
        "with --executor ray a shard runs only on a node started with these resources.",
    )

    @field_validator("resources")
    @classmethod
    def _positive_resources(cls, resources: dict[str, float]) -> dict[str, float]:
        bad = sorted(k for k, v in resources.items() if not k or v <= 0)
        if bad:
            raise ValueError(f"resources must be positive amounts: {', '.join(bad)}")
        return resources

    @field_validator("hooks")
    @classmethod
    def _no_duplicate_hooks(cls, hooks: list[Hook]) -> list[Hook]:
        dupes = sorted({h for h in hooks if hooks.count(h) > 1})
        if dupes:
            raise ValueError(f"hooks listed twice: {', '.join(dupes)}")
        return hooks

    def test_env(self, profile_path: Path) -> dict[str, str]:
        """Environment for the backend's test processes: ``env``, and ``python_path``
        (relative to the profile at ``profile_path``) ahead of the caller's PYTHONPATH."""
        env = dict(self.env)
        paths = [str((profile_path.parent / p).resolve()) for p in self.python_path]
        if paths:
            env["PYTHONPATH"] = os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env.setdefault("PYTORCH_PRINT_REPRO_ON_FAILURE", "0")
        return env

    def behaviour_env(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The environment that changes what the backend does: ``env``, and the variables of
        ``environ`` that ``digest_env`` names (test processes inherit them)."""
        patterns = self.digest_env if self.digest_env is not None else [f"{self.device.torch_name.upper()}_*"]
        found = {k: v for k, v in environ.items() if any(fnmatch.fnmatchcase(k, p) for p in patterns)}
        return dict(sorted({**found, **self.env}.items()))


def load_profile(path: Path, *, check_paths: bool = True) -> tuple[BackendProfile, dict[str, list[Path]]]:
    """The profile at ``path`` and its resolved paths (``source_paths``, ``docs``).

    Schema problems raise ConfigError with file:line:col; a listed path that does not exist
    is a ConfigError at that entry's position (when ``check_paths``).
    """
    from testcurator.config.loader import load_model  # the config loader owns YAML positions
    from testcurator.config.yamlio import locate

    if not path.exists():
        raise MissingPathError(path, "backend profile")
    profile, tree = load_model(path, BackendProfile)
    base = path.parent
    resolved = {key: [(base / p).resolve() for p in getattr(profile, key)] for key in ("source_paths", "docs")}
    if check_paths:
        problems = [
            Problem(locate(tree, (key, i), str(path)), f"{key}[{i}]: {p} does not exist")
            for key, paths in resolved.items() for i, p in enumerate(paths) if not p.exists()
        ]
        if problems:
            raise ConfigError(problems)
    return profile, resolved

