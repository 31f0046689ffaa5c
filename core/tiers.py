"""Tiers (seed 000): the names, the key that matches an instance across devices, the file.

A tier key names an instance by what it is, not by its node id, so the L1 chosen from
the CPU capture (``TestFooCPU::test_bar_cpu_float32``) selects the device's instance
(``TestFooCURATEDEV::test_bar_curatedev_float32``): file, generic name, op, dtype, module.
"""

from __future__ import annotations

import json
from pathlib import Path

from testcurator.errors import BadInputError, MissingPathError

TIERS = ("L1", "L2", "L3")
TIERS_FILE = "tiers.json"


def tier_key(file: str, generic: str, op: str | None, dtype: str | None, module: str | None) -> str:
    return f"{file}::{generic}|op={op or ''}|dtype={dtype or ''}|module={module or ''}"


def read_l1_keys(path: Path) -> frozenset[str]:
    """The L1 keys of a tiers file written by ``testcurator tiers``."""
    if not path.is_file():
        raise MissingPathError(path, "tiers file (run `testcurator tiers` first)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return frozenset(data["L1"]["keys"])
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise BadInputError(f"{path}: not a tiers file written by `testcurator tiers` ({exc})") from exc
