"""Where the config of one upstream test file lives, and how it names that file.

The pipeline writes one config per upstream test file, mirroring the tree under a configs
folder (``test/test_ops.py`` -> ``configs/test/test_ops.yaml``), and names the upstream
file through ``${TORCH_ROOT}`` so a config moves with the tree it curates.
"""

from __future__ import annotations

from pathlib import Path


def config_path(configs_dir: Path, rel: str) -> Path:
    """The config of upstream file ``rel`` (relative to the torch root) under ``configs_dir``."""
    return configs_dir / (rel.removesuffix(".py") + ".yaml")


def raw_path(rel: str) -> str:
    """How a config's ``files[].path`` names upstream file ``rel``."""
    return "${TORCH_ROOT}/" + rel
