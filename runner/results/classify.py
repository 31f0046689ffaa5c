"""Classify one test failure from its text, keeping the exact text that decided.

``classify(text, outcome=..., returncode=...)`` tries the rules of :data:`RULES` in order;
the first that matches wins. Order matters and is deliberate:

0. ``unexpected_pass``: an ``xfail_strict`` test passed; pytest reports it failed with
   ``[XPASS(strict)] <the config's reason>``, and that reason may quote an error: no rule
   below may read it as the failure.

1. ``timeout``: the runner's hang guard fired (``Timeout (0:00:03)!`` from faulthandler,
   or pytest-timeout's ``Failed: Timeout``), or the runner says so.
2. ``crash``: the process died under the test: ``Fatal Python error: Segmentation fault``
   (faulthandler), a negative return code (a signal), xdist's ``worker 'gw0' crashed while
   running ...``. A crash whose retry passes is re-labelled ``transient`` by the runner.
2b. ``memory_limit``: the plugin's line (:data:`~testcurator.vocab.MEMORY_LIMIT_LINE`) over an
   allocation that failed under the run's per-test memory limit: the test's own need, the
   same on every attempt; a "Cannot allocate memory" without it is the machine's (below).
3. ``transient``: infrastructure, not the backend: connection resets, ``Address already in
   use``, ``Resource temporarily unavailable``, ``No space left on device``, too many open
   files, out-of-memory on a device (depends on what else runs). The runner also labels any
   failure that passes on retry ``transient`` (flaky).
4. ``unsupported_dtype`` before ``unsupported_op``: dispatch macros say ``"abs_cpu" not
   implemented for 'Half'``; a missing kernel names an op with ``Could not run 'aten::x'``
   and never a dtype, so the dtype rule cannot steal an op failure.
5. ``unsupported_op``: ``Could not run 'aten::add.out' with arguments from the 'curatedev'
   backend``, ``The operator 'aten::x' is not currently implemented for the X device``,
   a ``NotImplementedError`` naming ``aten::x``, a missing derivative, ATen's stub for an op a
   backend must register itself (``convolution_overrideable not implemented. You are likely
   triggering this with tensor backend other than CPU/CUDA/MKLDNN``).
6. ``numerical_mismatch``: ``torch.testing.assert_close`` / ``TestCase.assertEqual``
   reports (``Tensor-likes are not close!``, ``Mismatched elements: 3 / 4 (75.0%)``,
   ``Greatest absolute/relative difference``), and metadata mismatches (``The values for
   attribute 'dtype' do not match``) since the backend produced a wrong result.
7. ``test_error``: the test broke by itself: AttributeError, NameError, ImportError,
   SyntaxError, a call with the wrong signature, a missing fixture, a collection error.
8. ``unknown``: anything else; the evidence is the exception line.

Rules read the *focus* of a failure text: pytest's ``E`` lines when present, else the
text without traceback frames, so source code quoted in a traceback (torch's own wrapper
mentions ``Exception(``) never matches. Failures inside OpInfo sample loops are re-raised
as a plain ``Exception`` wrapping the original message; the rules match on the message,
so the wrapper changes nothing.
"""

from __future__ import annotations

import re
import signal as _signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from testcurator.memlimit import ALLOC_FAILED
from testcurator.vocab import MEMORY_LIMIT_LINE

MAX_EVIDENCE = 600


@dataclass(frozen=True)
class Classification:
    """A failure class, the text that decided it, and what it named."""

    failure_class: str
    evidence: str
    op: str | None = None
    dtype: str | None = None
    signal: str | None = None


@dataclass(frozen=True)
class _Input:
    full: str
    focus: str
    outcome: str | None
    returncode: int | None


Rule = Callable[[_Input], "Classification | None"]

_E_LINE = re.compile(r"^E(?: {1,}|$)(.*)$", re.M)
_FRAME = re.compile(r'^\s*File "[^"]*", line \d+')
_EXC_LINE = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*(?:Error|Exception|Failed|Interrupt|Exit)|Exception))"
    r"(?::[ \t]?(?P<msg>.*))?$",
    re.M,
)


def focus_text(text: str) -> str:
    """The part of a failure text that states the error (see module docstring)."""
    e_lines = _E_LINE.findall(text)
    if e_lines:
        return "\n".join(line.strip() for line in e_lines)
    kept: list[str] = []
    skip_code = False
    for line in text.splitlines():
        if _FRAME.match(line):
            skip_code = True
            continue
        if skip_code and line.startswith("    "):
            continue  # the quoted source line (and carets) under a frame
        skip_code = False
        if line.strip() and not line.startswith("Traceback (most recent call last)"):
            kept.append(line.strip())
    return "\n".join(kept)


def exception_lines(focus: str) -> list[tuple[str, str]]:
    """``(type, message)`` of every exception line, root cause first."""
    return [(m.group("type"), m.group("msg") or "") for m in _EXC_LINE.finditer(focus)]


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_EVIDENCE else text[: MAX_EVIDENCE - 3] + "..."


def _signal_name(returncode: int | None) -> str | None:
    if returncode is None or returncode >= 0:
        return None
    try:
        return _signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


# -- 0. a strict xfail that passed ------------------------------------------------------
_XPASS_STRICT = re.compile(r"^\[XPASS\(strict\)\] ?(?P<reason>[^\n]*)", re.M)


def _unexpected_pass(inp: _Input) -> Classification | None:
    # pytest fails the test with the xfail's own reason as its text: the error quoted in that
    # reason (a missing kernel, say) is what was expected, not what happened.
    match = _XPASS_STRICT.search(inp.full)
    if match is None:
        return None
    reason = match.group("reason").strip()
    return Classification("unexpected_pass", _clip("passed, but the config expects it to fail (xfail_strict)"
                                                   + (f": {reason}" if reason else "")))


# -- 1. timeout -------------------------------------------------------------------------
_TIMEOUT = re.compile(r"^(?:Timeout \(\d+:\d\d:\d\d(?:\.\d+)?\)!|Failed: Timeout >[^\n]*)", re.M)


def _timeout(inp: _Input) -> Classification | None:
    match = _TIMEOUT.search(inp.full)
    if match:
        return Classification("timeout", match.group(0))
    if inp.outcome == "timeout":
        return Classification("timeout", _last_line(inp.full) or "per-test timeout expired")
    return None


# -- 2. crash ---------------------------------------------------------------------------
_FATAL = re.compile(r"^Fatal Python error: (?P<what>[^\n]+)", re.M)
_FATAL_SIGNALS = {
    "Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT", "Bus error": "SIGBUS",
    "Floating point exception": "SIGFPE", "Illegal instruction": "SIGILL",
}
_XDIST_CRASH = re.compile(r"worker '[^']+' crashed while running '[^']*'")


def _crash(inp: _Input) -> Classification | None:
    fatal = _FATAL.search(inp.full)
    if fatal:
        what = fatal.group("what").strip()
        sig = _FATAL_SIGNALS.get(what) or _signal_name(inp.returncode)
        return Classification("crash", fatal.group(0).strip(), signal=sig)
    sig = _signal_name(inp.returncode)
    xdist = _XDIST_CRASH.search(inp.full)
    if xdist:
        return Classification("crash", xdist.group(0), signal=sig)
    if sig is not None or inp.outcome == "crashed":
        evidence = f"process killed by {sig}" if sig else (_last_line(inp.full) or "process died")
        return Classification("crash", evidence, signal=sig)
    return None


# -- 2b. the run's memory limit ------------------------------------------------------------
def _memory_limit(inp: _Input) -> Classification | None:
    """The plugin's line over an allocation that failed under ``--curate-memory-limit``:
    before ``transient``, which reads "Cannot allocate memory" as the machine's state."""
    if not inp.full.startswith(MEMORY_LIMIT_LINE):
        return None
    first, _, rest = inp.full.partition("\n")
    alloc = ALLOC_FAILED.search(rest)
    return Classification("memory_limit", _clip(f"{first} ({_line_of(rest, alloc)})" if alloc else first))


# -- 3. transient / infrastructure --------------------------------------------------------
_TRANSIENT = re.compile(
    r"(?:Connection reset by peer|Connection refused|Connection aborted|Broken pipe"
    r"|Address already in use|Resource temporarily unavailable|No space left on device"
    r"|Too many open files|Temporary failure in name resolution|Cannot allocate memory"
    r"|CUDA out of memory|CUDA error: out of memory|HIP out of memory|XPU out of memory"
    r"|ConnectionResetError|BrokenPipeError|Stale file handle)"
)


def _transient(inp: _Input) -> Classification | None:
    match = _TRANSIENT.search(inp.focus)
    return Classification("transient", _clip(_line_of(inp.focus, match))) if match else None


# -- 4. unsupported dtype -----------------------------------------------------------------
_SCALAR_TYPES = {
    "Half": "float16", "BFloat16": "bfloat16", "Float": "float32", "Double": "float64",
    "ComplexHalf": "complex32", "ComplexFloat": "complex64", "ComplexDouble": "complex128",
    "Bool": "bool", "Byte": "uint8", "Char": "int8", "Short": "int16", "Int": "int32",
    "Long": "int64", "UInt16": "uint16", "UInt32": "uint32", "UInt64": "uint64",
    "Float8_e4m3fn": "float8_e4m3fn", "Float8_e5m2": "float8_e5m2",
    "Float8_e4m3fnuz": "float8_e4m3fnuz", "Float8_e5m2fnuz": "float8_e5m2fnuz",
}
# Patterns match the core phrase only (a leading [^\n]* would rescan every start position
# of 3,000-character dispatcher lines); the evidence is then the whole line.
_DTYPE_PATTERNS = (
    re.compile(r"not implemented for '(?P<st>\w+)'"),
    re.compile(r"(?:not supported|unsupported) (?:for|with) (?:dtype|the dtype|input dtype|type) (?:torch\.)?(?P<st>\w+)", re.I),
    re.compile(r"[Uu]nsupported (?:dtype|data type|scalar type)[:= ]+(?:torch\.)?(?P<st>\w+)"),
    re.compile(r"Expected a floating point or complex tensor as input\. Got (?P<st>\w+)"),
    re.compile(r"on a (?P<st>bool) tensor is not supported"),
    re.compile(r"(?:is|are)? ?not (?:supported|implemented) for (?P<st>complex|bool|integer|integral|floating[- ]point) (?:inputs|tensors|dtypes?|types?)", re.I),
    re.compile(r"does not support (?P<st>complex|bool|integer|integral)", re.I),
)


_ATEN_OP = re.compile(r"aten::[\w.]*\w")


def _line_of(text: str, match: re.Match[str]) -> str:
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start : end if end >= 0 else len(text)].strip()


def _dtype_from(token: str) -> str | None:
    if token in _SCALAR_TYPES:
        return _SCALAR_TYPES[token]
    from testcurator.installed import dtype_names

    return token if token in dtype_names() else None


def _unsupported_dtype(inp: _Input) -> Classification | None:
    for pattern in _DTYPE_PATTERNS:
        match = pattern.search(inp.focus)
        if match:
            line = _line_of(inp.focus, match)
            op = _ATEN_OP.search(line)  # backends often name the op too: "aten::sin.out" not implemented for 'Double'
            return Classification("unsupported_dtype", _clip(line), dtype=_dtype_from(match.group("st")),
                                  op=op.group(0) if op else None)
    return None


# -- 5. unsupported op --------------------------------------------------------------------
#: The dispatcher's own word that an op overload has no kernel for the backend's dispatch key,
#: whatever the dtypes (the capability table reads it too: memory/capability.py).
MISSING_KERNEL = re.compile(r"Could not run '(?P<op>[\w:.]+)' with arguments from the '(?P<be>\w+)' backend")
_OP_PATTERNS = (
    MISSING_KERNEL,
    re.compile(r"The operator '(?P<op>[\w:.]+)' is not currently implemented for the \w+ device"),
    re.compile(r"derivative for (?P<op>[\w:.]+) is not implemented"),
    re.compile(r"^(?:\w+\.)*NotImplementedError:[^\n]*?(?P<op>aten::[\w.]+)", re.M),
    re.compile(r"\b(?P<op>aten::[\w.]+)\b[^\n]*?(?:not implemented|not supported|no kernel)", re.I),
    # ATen's stubs for the ops a backend outside CPU/CUDA must register itself (convolution
    # reaches ``convolution_overrideable`` on any privateuse1 device): they name the op bare.
    re.compile(r"^(?:\w+\.)*NotImplementedError: (?P<op>\w+)(?: not implemented\.|:) You are likely triggering "
               r"this with tensor backend other than", re.M),
)
_WHOLE_LINE_OPS = frozenset({3, 4})  # indexes of _OP_PATTERNS whose evidence is the line


def _unsupported_op(inp: _Input) -> Classification | None:
    for index, pattern in enumerate(_OP_PATTERNS):
        match = pattern.search(inp.focus)
        if match:
            evidence = _line_of(inp.focus, match) if index in _WHOLE_LINE_OPS else match.group(0)
            op = match.group("op")
            return Classification("unsupported_op", _clip(evidence), op=op if "::" in op else f"aten::{op}")
    return None


# -- 6. numerical mismatch ----------------------------------------------------------------
_MISMATCH_HEAD = re.compile(
    r"^(?:(?:\w+\.)*(?:AssertionError|Exception): )?"
    r"((?:Tensor-likes|Scalars|Booleans) are not (?:close|equal)!"
    r"|The values for attribute '\w+' do not match[^\n]*|Booleans mismatch[^\n]*)",
    re.M,
)
_MISMATCH_DETAIL = re.compile(
    r"^(?:Mismatched elements: [^\n]+|Greatest (?:absolute|relative) difference: [^\n]+"
    r"|(?:Absolute|Relative) difference: [^\n]+|Expected [^\n]+ but got [^\n]+)$",
    re.M,
)


def _numerical(inp: _Input) -> Classification | None:
    head = _MISMATCH_HEAD.search(inp.focus)
    details = list(dict.fromkeys(m.group(0).strip() for m in _MISMATCH_DETAIL.finditer(inp.focus)))
    if head is None and not any(d.startswith(("Mismatched", "Greatest")) for d in details):
        return None
    if details:
        return Classification("numerical_mismatch", "\n".join(details[:4]))
    return Classification("numerical_mismatch", _clip(head.group(1) if head else ""))


# -- 7. test error -----------------------------------------------------------------------
_TEST_ERROR_TYPES = frozenset({
    "AttributeError", "NameError", "UnboundLocalError", "ImportError", "ModuleNotFoundError",
    "SyntaxError", "IndentationError",
})
_SIGNATURE = re.compile(r"missing \d+ required|unexpected keyword argument|takes \d+ positional|positional arguments? but")
_FIXTURE = re.compile(r"^(?:E\s+)?fixture '[^']+' not found$|^ERROR collecting [^\n]+$", re.M)


def _test_error(inp: _Input) -> Classification | None:
    fixture = _FIXTURE.search(inp.focus) or _FIXTURE.search(inp.full)
    if fixture:
        return Classification("test_error", fixture.group(0).strip())
    for exc_type, msg in exception_lines(inp.focus):
        base = exc_type.rsplit(".", 1)[-1]
        if base in _TEST_ERROR_TYPES or (base == "TypeError" and _SIGNATURE.search(msg)):
            return Classification("test_error", _clip(f"{exc_type}: {msg}" if msg else exc_type))
    return None


# -- 8. unknown --------------------------------------------------------------------------
def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


_PYTEST_TRAILER = re.compile(r"^\S[^\n]*?:\d+: (?P<type>(?:\w+\.)*\w+)$", re.M)


def _unknown(inp: _Input) -> Classification:
    excs = exception_lines(inp.focus)
    if excs:
        exc_type, msg = excs[0]
        return Classification("unknown", _clip(f"{exc_type}: {msg}" if msg else exc_type))
    first = next((line for line in inp.focus.splitlines() if line.strip()), "")
    trailer = _PYTEST_TRAILER.search(inp.full)  # "test_x.py:13: AssertionError" after E lines
    if trailer and first:
        return Classification("unknown", _clip(f"{trailer.group('type')}: {first}"))
    return Classification("unknown", _clip(first or _last_line(inp.full)))


RULES: Sequence[Rule] = (
    _unexpected_pass, _timeout, _crash, _memory_limit, _transient, _unsupported_dtype, _unsupported_op, _numerical, _test_error,
)


def classify(text: str | None, *, outcome: str | None = None, returncode: int | None = None) -> Classification:
    """The class of one failure; ``outcome``/``returncode`` come from the runner when known."""
    full = text or ""
    inp = _Input(full=full, focus=focus_text(full), outcome=outcome, returncode=returncode)
    for rule in RULES:
        result = rule(inp)
        if result is not None:
            return result
    return _unknown(inp)
