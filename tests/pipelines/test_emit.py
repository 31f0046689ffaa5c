"""A decision as a config entry (pipelines/emit.py): its op exclusions become ``edits.ops``
items that read back as the same exclusions (rebucket and the reason check read them so)."""

from __future__ import annotations

from typing import Any

import pytest

from testcurator.agents.decision import Decision
from testcurator.config.schema import Edits
from testcurator.pipelines.emit import entry_for

WHOLE, AT = {"name": "add"}, {"name": "masked.std", "dtypes": [{"name": "complex128"}, {"name": "complex64"}]}


@pytest.mark.parametrize("ops, items, back", [
    (("add",), [WHOLE], {"add"}),
    (("masked.std@complex64", "add", "masked.std@complex128"), [WHOLE, AT],
     {"add", "masked.std@complex64", "masked.std@complex128"}),
    (("add@float16", "add"), [WHOLE], {"add"}),  # the whole op: its dtypes are moot
], ids=["whole", "at dtypes", "whole wins"])
def test_op_exclusions_become_config_items_and_read_back(ops: tuple[str, ...], items: list[dict[str, Any]],
                                                         back: set[str]) -> None:
    spec = entry_for(Decision("TestA::test_ops", "mandatory_success", "r", (), "offline", None, exclude_ops=ops))
    assert spec.edits is not None and spec.edits["ops"]["exclude"] == items
    ops_edits = Edits.model_validate(spec.edits).ops
    assert ops_edits is not None and {e for item in ops_edits.exclude for e in item.entries()} == back
