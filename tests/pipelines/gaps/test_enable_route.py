"""The enable-op route of a gap: the OpInfo a config's exclusion cut from a test for that gap
alone, whether it excluded the whole OpInfo or one variant of it."""

from __future__ import annotations

import pytest

from testcurator.pipelines.gaps.attribute import OP, GapId, Held, Hit
from testcurator.pipelines.gaps.enable import route
from testcurator.vocab import TestKey

TEST = TestKey.parse("test/test_ops.py::TestCommon::test_out")
DOT = GapId(OP, "aten::dot")


def _held(skip: str, op: str, variant: str | None, gaps: tuple[GapId, ...] = (DOT,)) -> Held:
    return Held(key="k", test=TEST, dtype="float32", op=op, module=None, outcome="skipped",
                skip_text=f"Skipped: {skip} (/out/configs/test/test_ops.yaml:3:7)", device=True,
                hits=tuple(Hit(g, "missing_kernel", ("float32",), "aten::dot(float32,float32)", "probe") for g in gaps),
                op_variant=variant)


@pytest.mark.parametrize(("skip", "op", "variant", "gaps", "target"), [
    ("op matmul excluded by edits", "matmul", None, (DOT,), "matmul"),
    # refine excluded one variant alone (div_floor_rounding): enable-op lifts its OpInfo
    ("op div_floor_rounding excluded by edits", "div", "floor_rounding", (DOT,), "div"),
    ("op nn.functional.linear excluded by edits", "nn.functional.linear", None, (DOT,), "nn.functional.linear"),
    # another variant's exclusion, or a second gap on it: not this gap's alone
    ("op div_trunc_rounding excluded by edits", "div", "floor_rounding", (DOT,), None),
    ("op div_floor_rounding excluded by edits", "div", "floor_rounding", (DOT, GapId(OP, "aten::mv")), None),
])
def test_an_exclusion_of_an_opinfo_or_of_one_variant_routes_to_the_opinfo(
        skip: str, op: str, variant: str | None, gaps: tuple[GapId, ...], target: str | None) -> None:
    found = route(DOT, [TEST], {TEST: [_held(skip, op, variant, gaps)]}, {}, " --config c")
    assert found.commands == ((f"testcurator enable-op {target} --config c",) if target else ())
    assert found.unrouted == (() if target else (TEST,))
