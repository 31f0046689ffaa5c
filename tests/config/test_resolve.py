"""ResolvedEntry.exclusions: an entry's edits as the decisions of a rerun (pipelines/rebucket.py)
and the predictions of the reason check (pipelines/reason_check.py) name them."""

from __future__ import annotations

from pathlib import Path

import pytest

from testcurator.config.loader import load_config
from testcurator.config.resolve import Exclusions

CONFIG = """\
test_suite_config:
  files:
    - path: ${{TORCH_ROOT}}/test_a.py
      tests:
        - names: [TestA::test_one]
          mode: mandatory_success
{edits}
"""


@pytest.mark.parametrize(("edits", "expected"), [
    ("", Exclusions()),
    ("          edits:\n            dtypes: {exclude: [{name: float64}, {name: int8}]}",
     Exclusions(dtypes=("float64", "int8"))),
    ("          edits:\n            ops: {exclude: [{name: add}, {name: masked.std, dtypes: [{name: complex64}]}]}",
     Exclusions(ops=("add", "masked.std@complex64"))),
    ("          edits:\n            modules: {exclude: [{name: nn.Linear}]}", Exclusions(modules=("nn.Linear",))),
    # A value as the config spells it: 2x3, a bool, an int all read as name=value.
    ("          edits:\n            params: {exclude: [{name: shape, values: [2x3, 4]}, {name: inplace, values: [true]}]}",
     Exclusions(params=("shape=2x3", "shape=4", "inplace=True"))),
], ids=["none", "dtypes", "ops", "modules", "params"])
def test_exclusions_name_what_the_edits_exclude(tmp_path: Path, edits: str, expected: Exclusions) -> None:
    path = tmp_path / "curate.yaml"
    path.write_text(CONFIG.format(edits=edits), encoding="utf-8")
    (entry,) = load_config(path, torch_root=tmp_path).files[0].entries
    assert entry.exclusions() == expected
