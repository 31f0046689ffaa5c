"""Closing the loop: the ``enable-op`` command that admits a gap's alone tests once it is implemented.

``enable-op OP`` (pipelines/enable_op/) admits a test held back only by OP in one of two ways,
and the board names the command for each alone test accordingly:

- an ``@ops`` test whose config entry excludes an OpInfo op (``edits.ops.exclude: [matmul]``)
  for the gap (its matmul variants call ``aten::dot``): ``enable-op matmul`` lifts the exclusion;
- a test the configs hold back as a whole, with a reason that names ``aten::OP`` and no other
  ATen op: ``enable-op aten::OP`` makes it ``mandatory_success``.

An alone test neither way reaches (a crash's reason names no op, an excluded dtype) has no
command: the board says so, and the next ``testcurator run`` admits it once the op works.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from testcurator.pipelines.gaps.attribute import FEATURE, OP, GapId, Held
from testcurator.names import formatted_op
from testcurator.vocab import TestKey, op_key

# How enable-op reads the ops a reason names (pipelines/enable_op/workflow.py: base names).
_ATEN = re.compile(r"aten::([A-Za-z_]\w*)")


@dataclass(frozen=True)
class Route:
    """The commands that admit a gap's alone tests, and the alone tests none of them admits."""

    commands: tuple[str, ...] = ()
    unrouted: tuple[TestKey, ...] = ()


def _opinfos(gap: GapId, helds: Sequence[Held]) -> set[str]:
    """The OpInfo ops the configs cut from a test for ``gap`` alone, the whole OpInfo or one
    variant of it (``op div_floor_rounding excluded``: routed to its OpInfo, ``div``)."""
    return {h.op for h in helds if h.op and h.gaps == {gap} and any(
        h.skip_text.startswith(f"Skipped: op {name} excluded") for name in _names(h))}


def _names(held: Held) -> tuple[str, ...]:
    """What a config's exclusion calls the held instance's op: its OpInfo, or its variant as its test does."""
    op = held.op or ""
    return (op, formatted_op(op, held.op_variant)) if held.op_variant else (op,)


def route(gap: GapId, alone: Sequence[TestKey], helds: Mapping[TestKey, Sequence[Held]], whole: Mapping[TestKey, str],
          tail: str) -> Route:
    """The route of ``gap``'s ``alone`` tests; ``whole``: the reasons of the tests held back as a
    whole; ``tail``: the options every command takes (``--config ... --backend ...``)."""
    if gap.kind != OP:  # a feature: nothing to enable; a dtype: the profile's supported_dtypes says it
        return Route(unrouted=tuple(sorted(alone)) if gap.kind == FEATURE else ())
    base = op_key(gap.name).split(".", 1)[0]
    targets: set[str] = set()
    unrouted = []
    for test in sorted(alone):
        reason = whole.get(test)
        found = ({gap.name} if set(_ATEN.findall(reason)) == {base} else set()) if reason is not None \
            else _opinfos(gap, helds.get(test, ()))
        targets |= found
        if not found:
            unrouted.append(test)
    return Route(tuple(f"testcurator enable-op {t}{tail}" for t in sorted(targets)), tuple(unrouted))
