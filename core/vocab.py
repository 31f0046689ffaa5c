"""The shared vocabulary: modes, outcomes, failure classes and the test key.

Every package speaks these words; they are defined here once, so a set of outcomes or a
way of splitting ``file::Class::test`` cannot drift between the runner, the brains and the
pipeline. Nothing here imports the rest of testcurator.

- **Modes** (:data:`MODES`): what a config entry demands of a test.
- **Outcomes** (:data:`OUTCOMES`): how one instantiated test ended, as the runner records
  it (pytest's outcomes plus ``crashed`` and ``timeout``), and the sets that read them.
- **Failure classes** (:data:`FAILURE_CLASSES`): why a failure happened, as the runner's
  classifier names it, and which classes say nothing about the test itself.
- **The test key** (:class:`TestKey`): ``file::Class::test`` (``file::test`` for a
  module-level function), parsed and formatted by this module only.
- **Op names**: ATen ops as the dispatcher spells them (``aten::add.Tensor``) and OpInfo
  names (``nn.functional.relu``), and when one covers another (:func:`op_matches`); an
  exclusion of an OpInfo op at some dtypes only (``masked.std@complex64``, :func:`op_at`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Literal

# --- modes -------------------------------------------------------------------------------
Mode = Literal["mandatory_success", "xfail", "xfail_strict", "skip"]
MODES: tuple[str, ...] = ("mandatory_success", "xfail", "xfail_strict", "skip")
#: The modes that hold a test back from running green, and the two xfail modes.
HELD_BACK_MODES: tuple[str, ...] = ("skip", "xfail", "xfail_strict")
XFAIL_MODES: frozenset[str] = frozenset({"xfail", "xfail_strict"})
#: Strictest demand first: how reviews list modes.
MODES_BY_STRICTNESS: tuple[str, ...] = ("mandatory_success", "xfail_strict", "xfail", "skip")

# --- outcomes ----------------------------------------------------------------------------
OUTCOMES: tuple[str, ...] = (
    "passed", "failed", "error", "skipped", "xfailed", "xpassed", "crashed", "timeout",
)
#: Outcomes that carry a failure to classify and to retry (the runner), and that make a
#: ``mandatory_success`` test a regression (the verification run).
FAILING: frozenset[str] = frozenset({"failed", "error", "crashed", "timeout"})
#: How the refine stage reads a variant's outcomes as evidence. The draft runs every test
#: as ``mandatory_success``, so an ``xfailed`` there is the test's own expected failure (it
#: does not pass) and an ``xpassed`` is a pass; ``skipped`` says nothing.
FAILED_EVIDENCE: frozenset[str] = FAILING | {"xfailed"}
PASSED_EVIDENCE: frozenset[str] = frozenset({"passed", "xpassed"})
#: Outcomes that do not run the test's body to an end (JUnit's ``skipped`` element).
NOT_RUN: frozenset[str] = frozenset({"skipped", "xfailed"})
#: Outcomes that end the worker running the shard (the runner's hang and crash guards).
HARD_OUTCOMES: frozenset[str] = frozenset({"crashed", "timeout"})

# --- failure classes ---------------------------------------------------------------------
FAILURE_CLASSES: tuple[str, ...] = (
    "unsupported_op", "unsupported_dtype", "numerical_mismatch", "crash", "timeout",
    "transient", "test_error", "unknown", "unexpected_pass", "memory_limit",
)
#: The line the plugin puts first in the failure text of a test whose allocation failed under
#: ``--curate-memory-limit`` (plugin/events.py); the classifier reads it as ``memory_limit``:
#: the test needs more memory than the run allows it, which a retry does not change.
MEMORY_LIMIT_LINE = "testcurator: the test reached its memory limit"
#: An ``xfail_strict`` test that passed: pytest reports it ``failed`` (it fails the run), but
#: the test itself passed; evidence of a pass, never of a failure.
UNEXPECTED_PASS = "unexpected_pass"
#: A pytest that did not do its job (usage or internal error, interrupt, results cut short):
#: recorded against the invocation, never a test (runner/reconcile.py); exit code 3.
INFRASTRUCTURE = "infrastructure"
#: Failure classes that say nothing about the test (runner, device reset, network):
#: ``transient`` from our classifier, ``infrastructure``/``infra`` from other producers.
NOT_EVIDENCE_CLASSES: frozenset[str] = frozenset({"infrastructure", "infra", "transient"})
#: Failure classes that take down the worker running the shard.
HARD_FAILURE_CLASSES: frozenset[str] = frozenset({"crash", "timeout"})
#: Failure classes that are the dispatcher's answer ("Could not run 'aten::X' with arguments
#: from the 'dev' backend"): the same on every attempt, so a retry says nothing new.
DETERMINISTIC_CLASSES: frozenset[str] = frozenset({"unsupported_op", "unsupported_dtype", "memory_limit"})


# --- device capabilities (the probe) ----------------------------------------------------------
#: What replaying one captured call (op overload + input dtypes) on the device found:
#: ``works`` (ran, and matched CPU), ``missing_kernel`` (the device has no kernel for the op),
#: ``unsupported_dtype`` (a kernel, not for these dtypes), ``crash`` (the process died or hung),
#: ``wrong_result`` (ran, but differs from CPU on the same inputs), ``error`` (another error on
#: the device where CPU ran it), ``not_probed`` (no replayable example, or CPU fails it too).
PROBE_STATUSES: tuple[str, ...] = (
    "works", "missing_kernel", "unsupported_dtype", "crash", "wrong_result", "error", "not_probed",
)
#: Statuses that make a test using the call fail on the device.
PROBE_GAPS: frozenset[str] = frozenset({"missing_kernel", "unsupported_dtype", "crash", "wrong_result", "error"})


# --- the test key ------------------------------------------------------------------------
SEP = "::"


def split_name(name: str) -> tuple[str, str]:
    """``Class::test`` -> (``Class``, ``test``); a bare ``test`` -> (``""``, ``test``).

    pytest's parameter part (``test_x[a::b]``) stays with the test; a nested class keeps its
    ``Outer::Inner`` path.
    """
    head, bracket, params = name.partition("[")
    cls, sep, test = head.rpartition(SEP)
    return (cls, test + bracket + params) if sep else ("", name)


def join_name(cls: str, test: str) -> str:
    """The inverse of :func:`split_name`."""
    return f"{cls}{SEP}{test}" if cls else test


@dataclass(frozen=True, order=True)
class TestKey:
    """One test: the file it lives in, its class (``""`` at module level) and its name.

    As text, ``file::Class::test``. For a device-generic key (memory, evidence, the
    upgrade delta) ``file`` is relative to the torch root and ``name`` is the config's
    ``Class::test``; a pytest node id parses the same way (its ``test`` then carries the
    instantiated name and any ``[params]``).
    """

    __test__ = False  # not a pytest test class, despite the name

    file: str
    cls: str
    test: str

    @classmethod
    def parse(cls, text: str) -> TestKey:
        """``file::Class::test`` or ``file::test``; text without ``::`` is a bare file."""
        file, _, rest = text.partition(SEP)
        klass, test = split_name(rest) if rest else ("", "")
        return cls(file, klass, test)

    @classmethod
    def of(cls, file: str, name: str) -> TestKey:
        """The key of test ``name`` (``Class::test`` or ``test``) in ``file``."""
        klass, test = split_name(name)
        return cls(file, klass, test)

    @property
    def name(self) -> str:
        """``Class::test`` (``test`` at module level): the name a config entry lists."""
        return join_name(self.cls, self.test)

    @property
    def parts(self) -> tuple[str, ...]:
        """``(file, Outer, Inner, test)``: the node path pytest builds its own names from."""
        classes = tuple(self.cls.split(SEP)) if self.cls else ()
        return (self.file, *classes, self.test) if self.test else (self.file,)

    def __str__(self) -> str:
        return f"{self.file}{SEP}{self.name}" if self.test else self.file


def instance_key(nodeid: str, generic: str | None) -> str:
    """One test instance as a string that every process agrees on.

    A node id is what one pytest process called the instance: on a privateuse1 backend the
    device suffix of its class depends on what that process instantiated before it
    (OpenReg: ``TestFooPRIVATEUSE1`` or ``TestFooOPENREG``). The key puts the generic class
    (from ``generic``, ``Class::test``) in place of the instantiated one and keeps the
    instance's own name, which PyTorch derives from the device, dtype, op and parameters
    alone: ``f.py::TestFooPRIVATEUSE1::test_x_openreg_float32`` ->
    ``f.py::TestFoo::test_x_openreg_float32``. Without a class, the node id is the key.
    """
    gcls = split_name(generic)[0] if generic else ""
    key = TestKey.parse(nodeid)
    if not gcls or not key.cls:
        return nodeid
    outer, sep, _ = key.cls.rpartition(SEP)
    return str(TestKey(key.file, f"{outer}{sep}{gcls}", key.test))


# --- op names ----------------------------------------------------------------------------
def normalize_op(name: str) -> str:
    """``aten.add.Tensor`` / ``aten::add.Tensor`` -> ``aten::add.Tensor``; ``.default`` dropped.

    ``.default`` is dropped because the dispatcher names a default overload without it
    (``aten::relu``), and that is the spelling users see in backend error messages.
    """
    text = name.strip()
    if "::" not in text and "." in text:
        namespace, rest = text.split(".", 1)
        text = f"{namespace}::{rest}"
    return text[: -len(".default")] if text.endswith(".default") else text


def op_base(name: str) -> str:
    """``aten::add.Tensor`` -> ``aten::add`` (the op packet, every overload)."""
    namespace, _, rest = normalize_op(name).partition("::")
    return f"{namespace}::{rest.split('.', 1)[0]}"


def op_key(name: str) -> str:
    """``aten::add.Tensor`` -> ``add.Tensor``; OpInfo names (``nn.functional.relu``) unchanged."""
    return name.removeprefix("aten::")


def op_matches(op: str, entry: str) -> bool:
    """Whether ``op`` is covered by ``entry``: equal, or an overload of the ATen base ``entry``.

    Only ATen-qualified names have overloads split off: OpInfo names contain dots too.
    """
    if op_key(op) == op_key(entry):
        return True
    return op.startswith("aten::") and "." not in op_key(entry) and op_key(op).split(".", 1)[0] == op_key(entry)


#: ``masked.std@complex64``: a decision's exclusion of one OpInfo op at one dtype only (the
#: config's ``edits.ops.exclude`` item ``{name: masked.std, dtypes: [complex64]}``); an
#: ``exclude_ops`` entry without it excludes the op at every dtype.
OP_AT = "@"


def op_at(op: str, dtype: str) -> str:
    """``masked.std``, ``complex64`` -> ``masked.std@complex64``."""
    return f"{op}{OP_AT}{dtype}"


def split_op_at(entry: str) -> tuple[str, str | None]:
    """``masked.std@complex64`` -> (``masked.std``, ``complex64``); a whole op -> (op, None)."""
    op, sep, dtype = entry.partition(OP_AT)
    return op, (dtype if sep else None)


def op_words(entries: Iterable[str]) -> str:
    """``add``, ``masked.std@complex128``, ``masked.std@complex64`` -> ``add, masked.std in
    complex128 and complex64``, as reasons say them (sorted, one phrase per op)."""
    at: dict[str, list[str]] = {}
    for entry in sorted(entries):
        op, dtype = split_op_at(entry)
        at.setdefault(op, []).extend([dtype] if dtype else [])
    return ", ".join(f"{op} in {' and '.join(dtypes)}" if dtypes else op for op, dtypes in at.items())


def op_excluded(op: str | None, dtypes: Collection[str], entries: Iterable[str]) -> bool:
    """Whether ``entries`` (a decision's ``exclude_ops``) leave out an instance of ``op`` whose
    dtypes (one, or a pair's members) are ``dtypes``: the whole op, or the op at one of them,
    as the plugin applies the config's ``OpRef.dtypes`` (config/apply.py)."""
    if not op:
        return False
    for entry in entries:
        name, dtype = split_op_at(entry)
        if op_matches(op, name) and (dtype is None or dtype in dtypes):
            return True
    return False

