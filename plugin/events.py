"""Per-test event log and hang guard, so a runner can survive crashes and hangs.

Options (group ``curate``):

``--curate-events FILE``
    Append one JSON line per event. ``start`` (nodeid, pid, time, identity) is flushed and
    fsynced *before* the test runs, so when the process dies the log names the test that
    was running (a ``start`` without ``finish``). ``report`` lines carry each phase
    (when, outcome, longrepr text, duration, user_properties, wasxfail); ``finish`` closes
    a test; ``collected`` lists the node ids of the session and, beside them, each one's
    instance key (:func:`testcurator.vocab.instance_key`: what the runner selects and merges
    by, since node ids differ between processes on some backends) and generic name (and, under
    ``--curate-settle-skips``, ``settled``: those it settled); ``collect_error`` a file
    that failed to import, ``collect_skip`` one skipped as a whole (the config skips every test
    of a file that does not import). Under pytest-xdist every worker writes ``FILE.<workerid>`` and the
    controller writes ``FILE.controller`` with only xdist's crash reports (``when='???'``,
    "worker 'gw0' crashed while running ..."). Without xdist the process writes ``FILE``.
    Faulthandler output (segfault tracebacks, hang dumps) goes to ``<that file>.fault``.

``--curate-settle-skips``
    A test with an unconditional ``skip`` mark (and no ``skipif``: the config's skips) is
    settled at collection: the log gets one ``settled`` line for it (nodeid, identity, and the
    skipped setup's ``longrepr``: the mark's reason, as pytest words it), and it is deselected
    instead of going through pytest's per-test protocol. Its outcome is the same; its cost is
    not: about 1 ms a skipped test in one process, 2.3 ms under xdist (the report crosses to
    the controller, which writes it to the terminal and JUnit XML), and a draft of the
    real-upstream corpus on the example backend skips 32,859 of 35,979. One line, not the
    four (start, setup, teardown, finish) a run test gets: the runner parses every line of
    the log while the tests run, 131,000 of them for that draft's settled skips alone. The
    runner asks for it (it writes its own JUnit XML from the log); pytest's own JUnit XML then lacks those
    tests, so a user's CI run leaves it off. Under xdist every worker deselects them and
    ``gw0`` alone logs them.

``--curate-timeout SECONDS``
    Arm ``faulthandler.dump_traceback_later(SECONDS, exit=True)`` around each test
    (setup + call + teardown): a hung test dumps every thread's stack into the ``.fault``
    file and the process exits, which the runner records as ``timeout``.

``--curate-memory-limit MB``
    A test may grow its process's data by at most MB (testcurator/memlimit.py): past it an
    allocation fails in the test, whose logged text then says so first.

Wiring: :func:`add_options` and :func:`configure` are the two functions the curate entry
plugin calls. Both are idempotent, and this module also defines module-level
``pytest_addoption``/``pytest_configure`` so ``-p testcurator.plugin.events`` works alone
(e.g. with plugin autoloading disabled); loading both ways registers the options once.
"""

from __future__ import annotations

import atexit
import faulthandler
import gc
import json
import os
import time
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import IO, Any

import pytest

from testcurator.memlimit import MemoryLimit
from testcurator.names import params_from
from testcurator.plugin import summary
from testcurator.plugin.optionset import first_time, positive_mb
from testcurator.vocab import instance_key

PLUGIN_NAME = "testcurator-events"
IDENTITY_KEY = pytest.StashKey[dict[str, Any]]()


def add_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    """Add ``--curate-events`` and ``--curate-timeout`` (once per parser)."""
    if not first_time(parser, "events"):
        return
    group.addoption("--curate-events", metavar="FILE", default=None,
                    help="write a JSONL event log per test (start before it runs, reports after)")
    group.addoption("--curate-timeout", metavar="SECONDS", type=float, default=None,
                    help="kill the test process with a stack dump when one test runs longer")
    group.addoption("--curate-memory-limit", metavar="MB", type=positive_mb, default=None,
                    help="fail an allocation that would grow the process by more than MB during one test "
                         "(RLIMIT_DATA, Linux)")
    group.addoption("--curate-settle-skips", action="store_true", default=False,
                    help="log each test with an unconditional skip mark as skipped at collection and deselect it "
                         "(same outcome, without pytest's per-test protocol; needs --curate-events)")


def configure(config: pytest.Config) -> None:
    """Register the event writer when ``--curate-events``, ``--curate-timeout`` or
    ``--curate-memory-limit`` is given."""
    events = config.getoption("curate_events", None)
    timeout = config.getoption("curate_timeout", None)
    memory = config.getoption("curate_memory_limit", None)
    settle = bool(config.getoption("curate_settle_skips", False))
    if settle and events is None:
        raise pytest.UsageError("--curate-settle-skips needs --curate-events FILE: the log is where a settled test's "
                                "outcome is recorded")
    if (events is None and timeout is None and memory is None) or config.pluginmanager.has_plugin(PLUGIN_NAME):
        return
    workerinput = getattr(config, "workerinput", None)
    xdist_controller = workerinput is None and _xdist_active(config)
    if events is not None:
        suffix = f".{workerinput['workerid']}" if workerinput else (".controller" if xdist_controller else "")
        path: Path | None = Path(events + suffix)
    else:
        path = None
    # Without pytest's skipping plugin a skip mark skips nothing: nothing to settle then.
    settle = settle and config.pluginmanager.has_plugin("skipping")
    logs_settled = settle and (workerinput is None or workerinput["workerid"] == "gw0")
    writer = (_ControllerEvents(path) if xdist_controller
              else _EventWriter(path, timeout, settle, logs_settled, MemoryLimit(memory) if memory else None))
    config.pluginmanager.register(writer, PLUGIN_NAME)
    summary.register(config)
    _no_final_collection_at_exit()


_FREEZE_AT_EXIT: list[bool] = []


def _no_final_collection_at_exit() -> None:
    """Freeze the heap at interpreter exit, so the exit's garbage collection skips it.

    A test process that imported torch's testing internals (op_db's OpInfos, their sample
    functions) spent about 1 s of CPU at exit walking that heap for cycles to free, in a process
    that is ending: 0.8 s of a 4.6 s pytest over one small upstream file, and every run starts
    several such processes (collections, capture, draft, retries, verification). atexit hooks run
    before that collection; objects are still finalised by reference counting as modules are
    torn down. Once per process (an in-process pytest session configures this again).
    """
    if not _FREEZE_AT_EXIT:
        _FREEZE_AT_EXIT.append(True)
        atexit.register(gc.freeze)


def _xdist_active(config: pytest.Config) -> bool:
    numprocesses = getattr(config.option, "numprocesses", None)
    dist = getattr(config.option, "dist", "no")
    return bool(numprocesses) or dist not in (None, "no")


class _Log:
    """An append-only JSONL file; ``sync=True`` lines survive the process dying next."""

    def __init__(self, path: Path | None) -> None:
        self.fh: IO[str] | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.fh = path.open("a", encoding="utf-8")

    def write(self, event: dict[str, Any], *, sync: bool = False) -> None:
        if self.fh is None:
            return
        self.fh.write(json.dumps(event, default=str) + "\n")
        self.fh.flush()
        if sync:
            os.fsync(self.fh.fileno())

    def write_many(self, events: Iterable[dict[str, Any]]) -> None:
        if self.fh is not None:
            self.fh.writelines(json.dumps(event, default=str) + "\n" for event in events)
            self.fh.flush()

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None


def _longrepr_text(report: pytest.TestReport | pytest.CollectReport) -> str | None:
    if report.longrepr is None:
        return None
    if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        return str(report.longrepr[2])  # skip: (path, lineno, reason)
    return str(report.longrepr)


def _report_event(report: pytest.TestReport) -> dict[str, Any]:
    """A ``report`` line: one phase of a test."""
    return {"event": "report", "nodeid": report.nodeid, "when": report.when, "outcome": report.outcome,
            "longrepr": _longrepr_text(report), "duration": report.duration, "wasxfail": getattr(report, "wasxfail", None),
            "user_properties": [[str(k), str(v)] for k, v in report.user_properties], "pid": os.getpid(),
            "time": time.time(),
            # pytest 9 reports each unittest subTest of the call phase on its own, before the call's
            # own report: a failing subTest leaves the call itself passing.
            **({"subtest": True} if getattr(report, "context", None) is not None else {})}


def _skip_reason(item: pytest.Item) -> str | None:
    """The reason pytest's skipping plugin would skip ``item`` with for its first ``skip``
    mark; None without one, with a ``skipif`` (evaluated first, maybe to another reason), or
    with arguments that plugin would reject."""
    if item.get_closest_marker("skipif") is not None:
        return None
    mark = item.get_closest_marker("skip")
    if mark is None or len(mark.args) > 1 or set(mark.kwargs) - {"reason"} or (mark.args and mark.kwargs):
        return None
    reason = mark.kwargs.get("reason", mark.args[0] if mark.args else "unconditional skip")
    return reason if isinstance(reason, str) else None


def _settled(item: pytest.Item, reason: str, now: float, pid: int) -> dict[str, Any]:
    """A settled test's line: what pytest's protocol would have reported for its skip mark."""
    return {"event": "settled", "nodeid": item.nodeid, "pid": pid, "time": now, "identity": _identity(item),
            "longrepr": f"Skipped: {reason}"}


def _identity(item: pytest.Item) -> dict[str, Any]:
    """The item's identity (computed once: collection reads it for the key, the start event
    logs it), with its instance key."""
    ident = item.stash.get(IDENTITY_KEY, None)
    if ident is None:
        ident = _identify(item)
        ident["key"] = instance_key(item.nodeid, ident.get("generic"))
        item.stash[IDENTITY_KEY] = ident
    return ident


def _identify(item: pytest.Item) -> dict[str, Any]:
    """The curate plugin's properties when present, else identify() on the live objects."""
    props = {k[len("curate_"):]: v for k, v in item.user_properties if str(k).startswith("curate_")}
    if "params" in props:  # a JSON object in a JUnit property; an object in the event line
        props["params"] = dict(params_from(props["params"]))
    if "generic" in props or getattr(item, "cls", None) is None:
        return props
    from testcurator.names import identify

    name = getattr(item, "originalname", None) or item.name
    try:
        ident = identify(item.cls, name, getattr(item, "obj", None))
    except Exception:  # identity is a convenience; the nodeid is the record's key
        return props
    return {"generic": ident.generic, "device": ident.device, "dtype": ident.dtype,
            "op": ident.op, "op_variant": ident.op_variant, "module": ident.module, "params": dict(ident.params)}


class _EventWriter:
    """Runs in the process that executes tests (a plain pytest, or an xdist worker)."""

    def __init__(self, path: Path | None, timeout: float | None, settle: bool = False, logs_settled: bool = False,
                 memory: MemoryLimit | None = None) -> None:
        self.log = _Log(path)
        self.timeout, self.memory = timeout, memory
        self.settle, self.logs_settled = settle, logs_settled
        self.settled: list[tuple[pytest.Item, str]] = []
        self.fault: IO[str] | None = None
        if path is not None:
            self.fault = Path(str(path) + ".fault").open("a", encoding="utf-8")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # Segfault/abort tracebacks land next to the log, per process. Done at session
        # start: pytest's own faulthandler plugin points it at stderr during configure.
        if self.fault is not None:
            faulthandler.enable(file=self.fault, all_threads=True)

    # A wrapper's code after its yield runs once every plugin's hook has: what the others
    # deselect (-k, --curate-only, a shard, trylast ones included) is not settled here.
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> Generator[None, None, None]:
        yield
        if not self.settle:
            return
        keep = []
        for item in items:
            reason = _skip_reason(item)
            if reason is None:
                keep.append(item)
            else:
                self.settled.append((item, reason))
        if self.settled:
            config.hook.pytest_deselected(items=[item for item, _ in self.settled])
            items[:] = keep

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        collected = [*session.items, *(item for item, _ in self.settled)]
        idents = [_identity(i) for i in collected]
        self.log.write({"event": "collected", "nodeids": [i.nodeid for i in collected],
                        "keys": [d["key"] for d in idents], "generics": [d.get("generic") for d in idents],
                        "rootdir": str(session.config.rootpath), "pid": os.getpid(),
                        **({"settled": [item.nodeid for item, _ in self.settled]} if self.settled else {})}, sync=True)
        if self.logs_settled and self.settled:
            now, pid = time.time(), os.getpid()
            self.log.write_many(_settled(item, reason, now, pid) for item, reason in self.settled)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.log.write({"event": "collect_error", "nodeid": report.nodeid,
                            "longrepr": _longrepr_text(report), "pid": os.getpid()})
        elif report.skipped and report.nodeid.endswith(".py"):  # a file skipped as a whole
            self.log.write({"event": "collect_skip", "nodeid": report.nodeid,
                            "longrepr": _longrepr_text(report), "pid": os.getpid()})

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        self.log.write({"event": "start", "nodeid": item.nodeid, "pid": os.getpid(),
                        "time": time.time(), "identity": _identity(item)}, sync=True)
        if self.timeout:
            faulthandler.dump_traceback_later(self.timeout, exit=True, file=self.fault or _stderr())
        if self.memory:
            self.memory.arm()
        try:
            yield
        finally:
            if self.memory:
                self.memory.disarm()
            if self.timeout:
                faulthandler.cancel_dump_traceback_later()
            self.log.write({"event": "finish", "nodeid": item.nodeid, "time": time.time()})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        event = _report_event(report)
        if self.memory and report.failed and event["longrepr"]:
            event["longrepr"] = self.memory.note(event["longrepr"])
        self.log.write(event)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.log.close()


class _ControllerEvents:
    """The xdist controller: only xdist's crash reports (the workers log everything else)."""

    def __init__(self, path: Path | None) -> None:
        self.log = _Log(path)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "???":  # xdist's handle_crashitem marker
            self.log.write(_report_event(report), sync=True)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.log.close()


def _stderr() -> IO[str]:
    import sys

    return sys.__stderr__ or sys.stderr


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser.getgroup("curate"), parser)


def pytest_configure(config: pytest.Config) -> None:
    configure(config)
