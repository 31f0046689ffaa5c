"""The compile path of ``--curate-capture-ops``: the aten ops of the graphs a test compiles.

Eager capture (plugin/capture.py) sees what the dispatcher runs. A test that calls
``torch.compile`` exercises other ops: the graphs a compiler receives after AOTAutograd
(functionalized aten, forward and backward), which eager capture never sees. While a test's
call phase runs, every graph dynamo hands to a compiler goes instead to a *recording
backend*: AOTAutograd with forward/backward "compilers" that note each aten op of the graph
and run it unchanged (``aot_eager``'s semantics). So:

- the record is exact: the ops are read from the compiled graphs' nodes, not from logs;
- it is cheap: no code generation, and it works where the test's own backend cannot
  (inductor without a C++ compiler, a device with no compiler at all), which is what lets
  a CPU run capture a test that compiles for a backend without a compiler;
- the test's outcome under capture is that of ``aot_eager``: a test asserting inductor's
  generated code can fail under capture and pass without it.

A test that compiled gets a second record, ``source="compile"``, beside its eager one. The
eager recorder declares ``ignore_compile_internals`` so that dynamo compiles under it
instead of falling back to eager (which it does for any other active dispatch mode).
Interception point: ``OutputGraph.call_user_compiler`` (torch 2.13), swapped for the call
phase only and restored after, even when the test fails. Importing it imports dynamo (about
a second, once per capture session, only once the test run has imported torch); under
pytester's in-process runs the outer process must import it first (dynamo registers
global artifacts that a second import of the module rejects).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from testcurator.plugin.oprecord import OpRecord, merge_outcome, op_name

COMPILE_SOURCE = "compile"


def _graph_ops(gm: Any, seen: set[str]) -> None:
    for node in gm.graph.nodes:
        if node.op == "call_function" and hasattr(node.target, "name"):
            seen.add(op_name(node.target))


def recording_backend(seen: set[str]) -> Any:
    """An AOTAutograd backend noting every aten op of the forward and backward graphs."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._dynamo.backends.debugging import boxed_nop
    from torch.utils._python_dispatch import _disable_current_modes

    def record(gm: Any, example_inputs: Any) -> Any:
        _graph_ops(gm, seen)
        compiled = boxed_nop(gm, example_inputs)

        def run(args: list[Any]) -> Any:
            # The graph's ops are this record's; the eager recorder (which dynamo turns back
            # on for the compiled artifact's runtime) must not count them as eager ones.
            with _disable_current_modes():
                return compiled(args)

        run._boxed_call = True  # type: ignore[attr-defined]
        return run

    return aot_autograd(fw_compiler=record, bw_compiler=record)


@contextmanager
def recording(seen: set[str]) -> Iterator[None]:
    """Within the block, every graph dynamo compiles is compiled by :func:`recording_backend`."""
    from torch._dynamo.output_graph import OutputGraph

    original = OutputGraph.call_user_compiler

    def call_user_compiler(self: Any, gm: Any, example_inputs: Any) -> Any:
        saved = self.compiler_fn
        self.compiler_fn = recording_backend(seen)  # built only when a test compiles
        try:
            return original(self, gm, example_inputs)
        finally:
            self.compiler_fn = saved

    OutputGraph.call_user_compiler = call_user_compiler  # type: ignore[method-assign]
    try:
        yield
    finally:
        OutputGraph.call_user_compiler = original  # type: ignore[method-assign]


class CompileCapturePlugin:
    """Writes a ``compile`` record for each test whose call phase compiled a graph.

    ``write`` is the eager capture plugin's writer, so both sources share one file (and
    one part per xdist worker); ``fields`` names the test as the eager record does.
    """

    def __init__(self, write: Callable[[OpRecord], None], fields: Callable[[pytest.Item], dict[str, Any]],
                 paused: Callable[[], bool] = lambda: False) -> None:
        self._write = write
        self._fields = fields
        self._paused = paused  # the eager plugin's plain rerun of a failure: nothing to record
        self._seen: dict[str, set[str]] = {}
        self._outcome: dict[str, str] = {}
        self._errors: dict[str, str] = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        if self._paused() or "torch" not in sys.modules:  # a test that never imported torch compiles nothing
            return (yield)
        seen = self._seen.setdefault(item.nodeid, set())
        context = recording(seen)
        try:
            context.__enter__()
        except Exception as exc:  # capture never fails a test
            self._errors[item.nodeid] = f"compile capture: {exc!r}"
            return (yield)
        try:
            return (yield)
        finally:
            context.__exit__(None, None, None)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield
        if self._paused():
            return report
        nodeid = item.nodeid
        self._outcome[nodeid] = merge_outcome(self._outcome.get(nodeid), report)
        if report.when == "teardown":
            record = self.record(item, self._outcome.pop(nodeid))
            self._seen.pop(nodeid, None)
            self._errors.pop(nodeid, None)
            if record is not None:
                self._write(record)
        return report

    def record(self, item: pytest.Item, outcome: str | None) -> OpRecord | None:
        """The ``compile`` record of ``item`` (None when it compiled nothing)."""
        ops = self._seen.get(item.nodeid)
        error = self._errors.get(item.nodeid)
        if not ops and error is None:
            return None
        try:
            fields = self._fields(item)
        except Exception as exc:
            fields, error = {"generic": item.name}, f"identify: {exc!r}"
        return OpRecord(item.nodeid, source=COMPILE_SOURCE, aten=tuple(sorted(ops or ())),
                        outcome=outcome, error=error, **fields)
