"""``--curate-capture-ops FILE``: record which aten ops each test dispatches.

Each test's call phase (for unittest-style tests that includes ``setUp``/``tearDown``) runs
under a TorchDispatchMode that notes every aten overload it sees and every distinct call
(overload + input dtypes, :func:`testcurator.plugin.callspec.call_key`), and one JSON line per
instantiated test is appended to FILE (format: :class:`testcurator.plugin.oprecord.OpRecord`).
The first test of a process that makes a call carries one replayable example of it (the
capability probe replays it on the device; see plugin/callspec.py).
With ``--collect-only`` nothing runs: FILE gets the static records instead, one per
collected test, naming an ``@ops`` test's OpInfo and the aten op behind it.

What the mode sees, and so what is recorded: dispatcher-level ops below autograd and after
CompositeImplicit decomposition (``F.linear`` shows up as ``aten::addmm``), which is the
level a backend registers kernels at; ops of the test's own thread only, not of
subprocesses. Beside it, the few Tensor methods that branch on the device type in Python below
no aten op (callspec.PYTHON_CALLS: DLPack's) are wrapped for the call phase and noted as
``python::Tensor.<name>`` calls. Capture never fails a test: if the mode cannot be entered or left, the
error goes in the line and the test's outcome is its own. The mode itself can change what
a test does (a test that makes tensor subclasses or hashes storages): ``--curate-capture-plain``
(and without the compile path's recording backend) runs the tests plainly, outcomes only.
``--curate-capture-confirm`` runs each test that failed under them again at once, plainly, in
the same process (pytest's own protocol, unlogged, as pytest-rerunfailures reruns; inside the
per-test timeout): the record keeps the mode's ops and takes the plain run's outcome when
that one does not fail (``mode_failure``), so that a reason never quotes the mode's failure
as the test's "fails on CPU too". A second pytest over the failures cost its own start and
collection (20 s of a 400 s corpus run).

Under pytest-xdist each worker appends to ``FILE.<workerid>`` (``FILE.gw0``...); the
controller removes FILE and stale parts at start; ``testcurator ops ingest FILE`` reads
FILE and all parts.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest
from _pytest.runner import runtestprotocol

from testcurator.plugin.callspec import layout_op
from testcurator.plugin.compile_capture import CompileCapturePlugin
from testcurator.plugin.oprecord import OpRecord, capture_parts, merge_outcome, op_name
from testcurator.plugin.recorder import ModuleCallRecorder, PythonCallRecorder, recorder_class

OPTION = "--curate-capture-ops"
DEST = "curate_capture_ops"
PLAIN = "--curate-capture-plain"
CONFIRM = "--curate-capture-confirm"
PLUGIN_NAME = "testcurator-capture"


def add_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    """Add ``--curate-capture-ops``; idempotent, so ``-p`` and the entry plugin can coexist."""
    if any(OPTION in opt.names() for opt in group.options):
        return
    group.addoption(
        OPTION, dest=DEST, metavar="FILE", default=None,
        help="record, per test, the aten ops it dispatches (JSON lines) to FILE; with "
        "--collect-only, the static @ops -> OpInfo map instead",
    )
    group.addoption(
        PLAIN, dest="curate_capture_plain", action="store_true", default=False,
        help="with --curate-capture-ops: record each test's outcome without the dispatch mode (no ops), "
        "to confirm a failure seen under it",
    )
    group.addoption(
        CONFIRM, dest="curate_capture_confirm", action="store_true", default=False,
        help="with --curate-capture-ops: run a test that failed under the dispatch mode again at once without "
        "it; its record takes that run's outcome when it does not fail",
    )


def configure(config: pytest.Config) -> None:
    """Register the capture plugin only when the option is given."""
    value = config.getoption(DEST, None)
    if not value or config.pluginmanager.has_plugin(PLUGIN_NAME):
        return
    path = Path(config.invocation_params.dir, value)
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker is None:
        for part in capture_parts(path):  # a fresh run: stale parts would mix with ours
            part.unlink()
    out = path if worker is None else path.with_name(f"{path.name}.{worker}")
    # An xdist controller registers it too, harmlessly: it neither collects nor runs
    # tests, so none of the hooks below fire there.
    plugin = CapturePlugin(out, plain=bool(config.getoption("curate_capture_plain", False)),
                           confirm=bool(config.getoption("curate_capture_confirm", False)))
    config.pluginmanager.register(plugin, PLUGIN_NAME)
    if not plugin.plain:  # its recording backend runs compiled graphs as aot_eager, not as the test's own
        config.pluginmanager.register(CompileCapturePlugin(plugin._write, identity_fields, plugin.confirming),
                                      f"{PLUGIN_NAME}-compile")


# Module-level hooks so that ``-p testcurator.plugin.capture`` works on its own.
def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser.getgroup("curate"), parser)


def pytest_configure(config: pytest.Config) -> None:
    configure(config)


def opinfo_aten(op: Any) -> str | None:
    """The aten op behind an OpInfo (``aten::add``), when aten has one by that name."""
    import torch

    name = getattr(op, "aten_name", None) or getattr(op, "name", None)
    if not name or not hasattr(torch.ops.aten, name):
        return None
    return f"aten::{name}"


def _template(item: pytest.Item) -> Any:
    # The class attribute, not item.obj: PyTorch's TestCase re-wraps methods per instance,
    # and only the class attribute keeps instantiate_device_type_tests' param_kwargs.
    cls = getattr(item, "cls", None)
    name = getattr(item, "originalname", None) or item.name
    return getattr(cls, name, None) if cls is not None else None


def _param_op(item: pytest.Item) -> Any:
    # instantiate_device_type_tests stores {"op": OpInfo, ...} as the first default.
    defaults = getattr(_template(item), "__defaults__", None) or ()
    return defaults[0].get("op") if defaults and isinstance(defaults[0], dict) else None


def identity_fields(item: pytest.Item) -> dict[str, Any]:
    """generic/device/dtype/op/module of an item, named exactly as the curate plugin names them."""
    from testcurator.plugin.identity import IDENTITY_KEY, item_identity

    ident = item.stash.get(IDENTITY_KEY, None) or item_identity(item)
    return {"generic": ident.generic, "device": ident.device, "dtype": ident.dtype,
            "op": ident.op, "module": ident.module}


def static_record(item: pytest.Item) -> OpRecord:
    try:
        fields = identity_fields(item)
        op = _param_op(item)
        aten = opinfo_aten(op) if op is not None else None
        return OpRecord(item.nodeid, source="static", aten=(aten,) if aten else (),
                        outcome="skipped" if skipped_at_collection(item) else None, **fields)
    except Exception as exc:  # a record with the error beats a collection that dies
        return OpRecord(item.nodeid, item.name, "static", error=f"identify: {exc!r}")


def skipped_at_collection(item: pytest.Item) -> bool:
    """Whether the item is skipped before it runs, whatever the device: ``unittest.skip`` on
    the test or its class (``skipIf`` whose condition held at import), or pytest's ``skip``
    mark. Such an instance runs nothing, so the capture need not run it."""
    if item.get_closest_marker("skip") is not None:
        return True
    return any(getattr(obj, "__unittest_skip__", False) for obj in (getattr(item, "obj", None), getattr(item, "cls", None)))


@dataclass
class _Pending:
    ops: set[str] = field(default_factory=set)
    calls: set[str] = field(default_factory=set)
    examples: dict[str, str] = field(default_factory=dict)
    raised: set[str] = field(default_factory=set)
    worked: set[str] = field(default_factory=set)
    outcome: str | None = None
    failure: str | None = None
    errors: list[str] = field(default_factory=list)


class CapturePlugin:
    """Writes one OpRecord line per test to ``out``."""

    def __init__(self, out: Path, *, plain: bool = False, confirm: bool = False) -> None:
        self.out = out
        # Plain: outcomes only. The mode itself changes what a few tests do (upstream
        # test_content_store's hashing, test_load_state_dict's tensor subclasses fail under it
        # and pass without), so with ``confirm`` a failure under it is confirmed by a plain
        # rerun before a reason says the test "fails on CPU too".
        self.plain = plain
        self.confirm = confirm and not plain
        self._confirming = False
        self._unconfirmed: dict[str, _Pending] = {}
        self._pending: dict[str, _Pending] = {}
        self._handle: IO[str] | None = None
        self._examples: dict[str, str | None] = {}

    def _write(self, record: OpRecord) -> None:
        if self._handle is None:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            self._handle = open(self.out, "a", encoding="utf-8")
        # One write + flush per line: a run killed later keeps every finished test.
        self._handle.write(record.to_json() + "\n")
        self._handle.flush()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.config.getoption("collectonly"):
            for item in session.items:
                self._write(static_record(item))

    def confirming(self) -> bool:
        """Whether the plain rerun of a failure is under way (no recording then)."""
        return self._confirming

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        if self._confirming:
            return (yield)
        pending = self._pending.setdefault(item.nodeid, _Pending())
        recorder, modes = None, []
        try:  # the dispatch recorder, then the Python-call and module ones that note into it
            if not self.plain:
                recorder = recorder_class()(self._examples)
                for mode in (recorder, PythonCallRecorder(recorder), ModuleCallRecorder(recorder)):
                    mode.__enter__()
                    modes.append(mode)
        except Exception as exc:
            pending.errors.append(f"enter: {exc!r}")
        try:
            return (yield)
        finally:
            for mode in reversed(modes):
                try:
                    mode.__exit__(None, None, None)
                except Exception as exc:  # e.g. the test left its own mode pushed
                    pending.errors.append(f"exit: {exc!r}")
            if modes:  # the dispatch recorder entered: what it saw is the test's
                pending.ops.update(op_name(f) for f in recorder.seen)
                pending.calls.update(recorder.calls)
                pending.examples.update(recorder.new)
                pending.raised.update(recorder.raised)
                pending.worked.update(recorder.worked)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield  # outermost wrapper: sees xfail rewriting by the skipping plugin
        if self._confirming:
            return report
        pending = self._pending.setdefault(item.nodeid, _Pending())
        pending.outcome = merge_outcome(pending.outcome, report)
        if report.failed and pending.failure is None:
            pending.failure = failure_line(report)
        if report.when == "teardown":
            del self._pending[item.nodeid]
            if self.confirm and pending.outcome == "failed":
                self._unconfirmed[item.nodeid] = pending  # written once the plain rerun says
            else:
                self._write(self._captured(item, pending))
        return report

    # Innermost wrapper: the rerun is inside the per-test timeout of the events plugin's.
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        result = yield
        pending = self._unconfirmed.pop(item.nodeid, None)
        if pending is not None:
            self._write(self._confirmed(item, nextitem, pending))
        return result

    def _confirmed(self, item: pytest.Item, nextitem: pytest.Item | None, pending: _Pending) -> OpRecord:
        """The record of a test that failed under the mode, after one plain run of it: the
        first run tore down to ``nextitem``'s common parents, so setting up again is exact."""
        self._confirming = True
        try:
            # Frames the first run compiled went to the recording backend (aot_eager): cached,
            # the rerun would run them again instead of the test's own compiler (upstream
            # test_content_store: "xor_sum only implemented with inductor").
            dynamo = sys.modules.get("torch._dynamo")
            if dynamo is not None:
                dynamo.reset()
            reports = runtestprotocol(item, log=False, nextitem=nextitem)
        except Exception as exc:  # the mode's record stands, with what went wrong
            pending.errors.append(f"confirm: {exc!r}")
            return self._captured(item, pending)
        finally:
            self._confirming = False
        outcome: str | None = None
        for report in reports:
            outcome = merge_outcome(outcome, report)
        rerun_s = sum(report.duration for report in reports)
        if outcome is None or outcome == "failed":
            return self._captured(item, pending, rerun_s=rerun_s)
        failed = [r for r in reports if r.failed]
        pending.outcome, pending.failure = outcome, failure_line(failed[0]) if failed else None
        return self._captured(item, pending, mode_failure=True, rerun_s=rerun_s)

    def _captured(self, item: pytest.Item, pending: _Pending, *, mode_failure: bool = False,
                  rerun_s: float | None = None) -> OpRecord:
        errors = list(pending.errors)
        try:
            fields = identity_fields(item)
        except Exception as exc:
            fields = {"generic": item.name}
            errors.append(f"identify: {exc!r}")
        layouts = {op for op in map(layout_op, pending.calls) if op}
        return OpRecord(item.nodeid, source="captured", aten=tuple(sorted(pending.ops)),
                        calls=tuple(sorted(pending.calls)), layouts=tuple(sorted(layouts)),
                        examples=dict(sorted(pending.examples.items())),
                        raised=tuple(sorted(pending.raised - pending.worked)),
                        outcome=pending.outcome, error="; ".join(errors) or None, failure=pending.failure,
                        mode_failure=mode_failure, rerun_s=rerun_s, **fields)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


MAX_FAILURE_LINE = 300
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def failure_line(report: pytest.TestReport) -> str | None:
    """The failure's exception line (``AssertionError: ...``), as pytest's short summary
    shows it: what a reason quotes when a test fails on CPU as well."""
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None) or (report.longreprtext.strip().splitlines() or [""])[-1]
    line = " ".join(_ANSI.sub("", str(message)).split())  # torch.load's error is in bold
    return line[:MAX_FAILURE_LINE] or None
