"""What the offline brain's bucket rules know about one test, and the edits they build up;
and whether a plain test runs on CPU only (the capture rules read that too).

Apart from the rules (agents/offline/bucket.py, and the probe rule in
agents/offline/probe.py, which the bucket's rule table lists) so that both read them
without importing each other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from testcurator.agents.brain import SOURCE_LINES, BucketRequest
from testcurator.agents.offline.rules import Wish
from testcurator.names import split_dtypes
from testcurator.vocab import op_excluded


@dataclass(frozen=True)
class Deco:
    """One decorator of the test: its last name (``onlyCUDA``), its arguments and its text."""

    short: str
    args: str
    text: str


@dataclass
class Draft:
    """Edits the ops/dtypes rules add before a later rule decides the mode."""

    exclude_dtypes: list[str] = field(default_factory=list)
    exclude_ops: list[str] = field(default_factory=list)
    exclude_modules: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)

    def clause(self) -> str:
        return f", with {'; '.join(self.notes)}" if self.notes else ""

    def excludes(self, dtype: str | None, op: str | None, module: str | None) -> bool:
        """Whether these edits leave out an instance of ``dtype`` (either member of a pair), ``op``
        and ``module``."""
        dtypes = split_dtypes(dtype)
        return (any(d in self.exclude_dtypes for d in dtypes) or op_excluded(op, dtypes, self.exclude_ops)
                or bool(module) and module in self.exclude_modules)


@dataclass(frozen=True)
class Facts:
    """The test's decorators, the hooks the backend has after the wishes, and the features
    the test needs ({feature: what shows it})."""

    decos: tuple[Deco, ...]
    hooks: frozenset[str] | None
    wishes: tuple[Wish, ...]
    needs: dict[str, str]


# Words by which a plain test reaches a device of its own: a device argument or string, a
# device flag or query, the privateuse1 and accelerator APIs.
_DEVICE_WORDS = re.compile(r"\bdevice|cuda|privateuse1|PRIVATEUSE1|accelerator|\bmps\b|\bxpu\b")
# The CPU named outright (``device="cpu"``, ``torch.device("cpu")``) is no device of the
# backend's: upstream test_dlpack's ``test_dlpack_invalid_cpu_stream(self)`` builds a CPU
# tensor so, and its calls raise on CPU whatever the backend.
_CPU_NAMED = re.compile(r"""\bdevice\s*=\s*(?:torch\.device\(\s*(['"])cpu\1\s*\)|(['"])cpu\2)|\btorch\.device\(\s*(['"])cpu\3\s*\)""")


def _reaches_a_device(text: str) -> bool:
    return bool(_DEVICE_WORDS.search(_CPU_NAMED.sub("", text)))


def names_no_device(req: BucketRequest) -> bool:
    """A plain test: no ``device`` parameter, no device word in its source. It runs on CPU on
    any backend's CI (the capture rules capture it even when it needs a hook the backend lacks)."""
    return bool(req.source) and not _reaches_a_device(req.source)


# A test's ``def`` line, its parameters over one or more lines (a default may hold parentheses).
_SIGNATURE = re.compile(r"^\s*(?:async\s+)?def\s+\w+\s*\((?:[^()]|\([^()]*\))*\)\s*(?:->[^:]*)?:", re.M)


def device_unused(req: BucketRequest) -> bool:
    """A device-generic test that takes its ``device`` and never uses it: no device word in its
    body (upstream test_indexing's ``test_truncate_leading_1s(self, device)`` builds CPU
    tensors only), or no ``device`` parameter at all in a device-generic class (upstream
    ``test_sort_stable_none(self)``). Its calls run on CPU on the backend's CI too, so the
    device's gaps cannot fail it. Unknown when the source shown was cut (``SOURCE_LINES``)."""
    if not req.source or len(req.source.splitlines()) >= SOURCE_LINES:
        return False
    signature = _SIGNATURE.search(req.source)
    if signature is None:
        return False
    return not _reaches_a_device(req.source[signature.end():])


# unittest's and pytest's ways to expect an exception, and the bare ones: a RuntimeError (or
# anything) with no message pattern.
_RAISES = re.compile(r"\b(?:assertRaises\w*|pytest\.raises)\s*\(")
_BARE_RAISES = re.compile(r"\b(assertRaises|pytest\.raises)\s*\(\s*(?:torch\.)?(RuntimeError|Exception)\s*([,)])([^\n]*)")


def expects_any_runtime_error(req: BucketRequest) -> bool:
    """Every exception the test expects is a bare ``RuntimeError`` (or ``Exception``), with no
    message pattern. A device that lacks a kernel raises NotImplementedError, a RuntimeError:
    a call the test makes to see it raise fails on the device as the test wants, wherever the
    device stops it (upstream test_indexing's ``test_setitem_expansion_error``). Where it
    expects a message or another type, where the device stops decides (test_indexing's
    ``test_trivial_fancy_out_of_bounds`` wants IndexError, which the CPU kernel raises): not
    known. Unknown too when the source shown was cut (``SOURCE_LINES``)."""
    if not req.source or len(req.source.splitlines()) >= SOURCE_LINES:
        return False
    expected = _RAISES.findall(req.source)
    bare = [m for m in _BARE_RAISES.finditer(req.source) if "match" not in m.group(4)]
    return bool(expected) and len(bare) == len(expected)


def runs_on_cpu_only(req: BucketRequest) -> bool:
    """A plain test that passed in every instance the capture ran on CPU: it runs the same on
    any backend's CI, so a hook the backend lacks cannot fail it (upstream test_out_dtype_op's
    torch.export tests, skipped as needing the export hook, pass on OpenReg)."""
    ran = [o for o in req.cpu_outcomes if o != "skipped"]
    return bool(ran) and all(o == "passed" for o in ran) and names_no_device(req)
