"""Gaps no probe status names, derived from what a failure says.

The probe replays one call at a time and compares its result with CPU: it sees a view that
comes back as a copy (the copy holds the right values) only through the writing twin of a view
the capture saw the test write into (plugin/callspec.py), and no missing feature outside the
dispatcher (DLPack, pinned memory). Execution sees both, and these rules read its evidence:

- **a view returned as a copy** (``view_copy``): the instance failed on the device with a
  numerical mismatch (or an assertion on ``is_view_of``/``_is_view``/``._base``), none of its
  calls is a gap in the probe's table (each computes the right values alone), and it called an
  ATen view op (:data:`VIEW_OPS`) and then wrote (an in-place op such as ``copy_``): the write
  did not reach the base. The op is the view op whose name shares a word with the test's name
  (``test_unfold_view`` -> ``aten::unfold``; ``test_set_real_imag`` -> ``aten::view_as_real``,
  which ``.real`` becomes); when no name does, the failure stays unattributed, naming the view
  ops it called.
- **a missing feature** (:data:`FEATURES`): the failure's exception line names it
  (``ValueError: Unknown device type openreg for Dlpack`` -> DLPack).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from testcurator.plugin.callspec import dispatch_op, split_key

# ATen ops whose output aliases their input (``Tensor(a)`` returns in native_functions.yaml), as
# the capture records them (CompositeImplicit ops such as ``real``, ``narrow`` or ``tensor_split``
# arrive as these).
VIEW_OPS = frozenset(f"aten::{name}" for name in (
    "alias", "as_strided", "chunk", "detach", "diagonal", "expand", "imag", "indices", "narrow", "permute", "real",
    "select", "slice", "split", "split_with_sizes", "squeeze", "t", "transpose", "unbind", "unflatten", "unfold",
    "unsqueeze", "values", "view", "view_as_complex", "view_as_real", "_reshape_alias", "_conj", "_neg_view",
    "_indices", "_values", "swapaxes", "swapdims", "movedim", "as_strided_", "squeeze_", "unsqueeze_", "transpose_",
    "t_", "swapaxes_", "swapdims_"))
# The words of a test name that say nothing about which view it checks.
_PLAIN_WORDS = frozenset({"test", "view", "views", "as", "inplace", "of", "the", "with", "and", "to", "set", "get"})
_VIEW_ASSERT = re.compile(r"is_view_of|_is_view\(\)|\._base\b")
_WORD = re.compile(r"[a-z0-9]+")
# The failing source lines of a traceback: pytest's long format marks them with ">", Python's
# own (``--tb=native``) prints each under its ``File "...", line N`` frame.
_MARKED = re.compile(r"^>\s+(.*)$", re.M)
_NATIVE = re.compile(r'^\s*File "[^"]+", line \d+, in \w+\n\s+(.*)$', re.M)


@dataclass(frozen=True)
class Feature:
    """A capability outside the dispatcher that an error line names."""

    name: str
    what: str
    pattern: re.Pattern[str]


FEATURES: tuple[Feature, ...] = (
    Feature("DLPack", "tensor exchange through DLPack (torch.utils.dlpack, Tensor.__dlpack__)",
            re.compile(r"dlpack", re.I)),
    Feature("pinned memory", "a pinned host allocator (PrivateUse1HooksInterface.getPinnedMemoryAllocator)",
            re.compile(r"getPinnedMemoryAllocator|pin_memory|pinned memory", re.I)),
    Feature("device generator", "a torch.Generator on the device",
            re.compile(r"device type for generator|Generator.*(not|unsupported)", re.I)),
)


def feature_of(evidence: str) -> Feature | None:
    """The feature an exception line names, if any."""
    return next((f for f in FEATURES if f.pattern.search(evidence)), None)


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _PLAIN_WORDS}


def view_ops_in(calls: Iterable[str]) -> list[str]:
    """The view ops among ``calls`` (op overload x dtypes), by base name, sorted."""
    bases = {dispatch_op(split_key(c)[0]).split(".", 1)[0] for c in calls}
    return sorted(b for b in bases if b in VIEW_OPS)


def _writes(calls: Iterable[str]) -> bool:
    return any(dispatch_op(split_key(c)[0]).split(".", 1)[0].endswith("_") for c in calls)


def looks_like_view_copy(failure_class: str | None, failure_text: str, calls: Iterable[str]) -> bool:
    """Whether a failure reads as a view that came back as a copy (see the module docstring)."""
    calls = list(calls)
    if not view_ops_in(calls):
        return False
    if failure_class == "numerical_mismatch":
        return _writes(calls)
    failing = _MARKED.findall(failure_text) or _NATIVE.findall(failure_text)
    return failure_class in ("unknown", None) and "AssertionError" in failure_text and any(
        _VIEW_ASSERT.search(line) for line in failing)


def view_copy_ops(test_name: str, calls: Iterable[str]) -> list[str]:
    """The view ops a view-copy failure of ``test_name`` is put on: those sharing a word with
    the test's name (``unfold`` in ``test_unfold_view``); none when no name does."""
    wanted = _words(test_name)
    return [op for op in view_ops_in(calls) if _words(op.partition("::")[2]) & wanted]
