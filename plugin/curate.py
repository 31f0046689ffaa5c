"""The curate plugin: applies a loaded config to collected items.

At collection it identifies every instantiated test (generic name, device, dtype, op,
module), adds dtype instances an entry asks for (``edits.dtypes.include``), applies the
mode as a mark with the config's reason, adds ``op__``/``dtype__``/``module__`` marks,
records the identity as JUnit properties, and reports per file what it applied and which
config entries matched nothing. The upstream tree is never written to: new dtype
instances are attributes added to the in-memory test class.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from testcurator.config.apply import Applied, decide, decision_key, probe
from testcurator.config.loader import paused_gc
from testcurator.config.resolve import LoadedConfig, ResolvedFile
from testcurator.names import TestIdentity, identify, params_text
from testcurator.plugin.capture import PLUGIN_NAME as CAPTURE
from testcurator.plugin.identity import IDENTITY_KEY, item_identity
from testcurator.plugin.only import PLUGIN_NAME as ONLY
from testcurator.plugin.tiers import PLUGIN_NAME as TIERS
from testcurator.vocab import XFAIL_MODES

INCLUDED_ATTR = "__curate_included_dtype__"
# Plugins that read an item's identity after this one computed it (plugin/identity.py).
IDENTITY_READERS = (TIERS, CAPTURE)


@dataclass
class CurateSummary:
    """What the plugin applied in one collection; plain data so xdist can ship it."""

    modes: Counter[str] = field(default_factory=Counter)
    per_file: dict[str, Counter[str]] = field(default_factory=dict)
    stale: dict[str, list[str]] = field(default_factory=dict)
    included: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "modes": dict(self.modes),
            "per_file": {k: dict(v) for k, v in self.per_file.items()},
            "stale": self.stale,
            "included": self.included,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CurateSummary:
        return cls(
            modes=Counter(data["modes"]),
            per_file={k: Counter(v) for k, v in data["per_file"].items()},
            stale={k: list(v) for k, v in data["stale"].items()},
            included=int(data["included"]),
        )


class CuratePlugin:
    def __init__(self, config: pytest.Config, loaded: LoadedConfig) -> None:
        self.config = config
        self.loaded = loaded
        self.summary = CurateSummary()
        self._marks: dict[tuple[str, str], pytest.MarkDecorator] = {}
        # Properties only matter to JUnit XML; building them for 20k items is not free.
        self._junit = bool(getattr(config.option, "xmlpath", None))
        self._files: dict[Path, ResolvedFile | None] = {}
        self._decisions: dict[tuple[object, ...], Applied] = {}
        self._outcomes: dict[Applied, Applied] = {}  # one object per distinct decision
        self._probe = config.getoption("curate_tier", None) == "L3"  # plugin/tiers.py

    def _decide(self, file: ResolvedFile | None, ident: TestIdentity) -> tuple[tuple[object, ...], Applied]:
        # Once per what the decision reads (config/apply.decision_key): the instances of an
        # @ops test that no edit or capability tells apart share one outcome object.
        key = decision_key(file, ident)
        applied = self._decisions.get(key)
        if applied is None:
            applied = decide(self.loaded, file, ident)
            applied = probe(applied) if self._probe else applied
            self._decisions[key] = applied = self._outcomes.setdefault(applied, applied)
        return key, applied

    def file_for(self, path: Path) -> ResolvedFile | None:
        # Items of one module share a path; realpath per item costs more than the rest.
        if path not in self._files:
            self._files[path] = self.loaded.file_for(path)
        return self._files[path]

    # --- edits.dtypes.include: add instances before unittest collects the class -------
    @pytest.hookimpl(tryfirst=True)
    def pytest_pycollect_makeitem(self, collector: pytest.Collector, name: str, obj: object) -> None:
        if not isinstance(obj, type) or getattr(obj, "device_type", None) is None:
            return None
        file = self.file_for(Path(str(collector.path)))
        if file is not None:
            self.summary.included += add_included_dtypes(obj, file)
        return None

    # --- a file skipped as a whole: its collection error is the skip, not a failure -----
    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector) -> Any:
        outcome = yield
        report = outcome.get_result()
        if not report.failed or not isinstance(collector, pytest.Module) or self._probe:
            return
        file = self.file_for(Path(str(collector.path)))
        if file is None or not wholly_skipped(file):
            return
        # The config skips every test of this file (the pipeline's decision for a file that
        # does not import): nothing of it would run, so its import error fails nothing.
        reason = (f"testcurator: every test of {file.raw_path} is skipped ({file.location}), "
                  f"and it does not import: {_error_line(str(report.longrepr))}")
        outcome.force_result(pytest.CollectReport(report.nodeid, "skipped", (str(collector.path), 0, f"Skipped: {reason}"),
                                                  [], sections=report.sections))

    # --- the decisions ----------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
        seen: dict[Path, set[str]] = {}
        # Letting the cyclic GC rescan torch's large heap every few thousand items was half of
        # the plugin's cost once.
        with paused_gc():
            self._curate_items(items, seen)
        self._record_stale(seen)

    def _curate_items(self, items: list[pytest.Item], seen: dict[Path, set[str]]) -> None:
        idents = [item_identity(item) for item in items]
        # Kept on the items only for a plugin that reads them: every object that outlives the
        # collection is scanned by each full GC pass over torch's heap, and 25,000 of them were
        # enough to set off one more (0.6 s on test_unary_ufuncs.py, 5% of its collection).
        keep = any(self.config.pluginmanager.has_plugin(name) for name in IDENTITY_READERS)
        # Mark names per (op, dtype, module), and the marks of each (decision, names): thousands
        # of instances share each.
        names_by: dict[tuple[object, ...], tuple[str, ...]] = {}
        marks = [names_by.get(k) or names_by.setdefault(k, tuple(marks_for(i)))
                 for i, k in ((i, (i.op, i.op_variant, i.dtype, i.module)) for i in idents)]
        self._register_marks({name for names in names_by.values() for name in names})
        decorators: dict[tuple[int, tuple[str, ...]], tuple[pytest.MarkDecorator, ...]] = {}
        # How many items got each decision in each file, summed into the summary at the end.
        tally: dict[tuple[int, int], list[Any]] = {}
        last_path, file = None, None
        for item, ident, names in zip(items, idents, marks):
            if item.path is not last_path:  # the items of one module share its path object
                last_path, file = item.path, self.file_for(item.path)
            key, applied = self._decide(file, ident)
            if keep:
                item.stash[IDENTITY_KEY] = ident
            applying = decorators.get((id(applied), names))
            if applying is None:
                applying = decorators[(id(applied), names)] = self._marks_of(applied, names)
            for mark in applying:
                item.add_marker(mark)
            if self._junit:
                item.user_properties.extend(junit_properties(ident, applied))
            counted = tally.get((id(file), id(applied)))
            if counted is None:
                counted = tally[(id(file), id(applied))] = [file, applied, 0]
            counted[2] += 1
            if file is not None:
                seen.setdefault(file.resolved_path, set()).add(key[1])  # the generic name
        for file, applied, n in tally.values():
            key = str(file.resolved_path) if file is not None else "(unlisted files)"
            self.summary.modes[applied.curated] += n
            self.summary.per_file.setdefault(key, Counter())[applied.curated] += n

    def _marks_of(self, applied: Applied, names: tuple[str, ...]) -> tuple[pytest.MarkDecorator, ...]:
        """The mode's mark (none for mandatory_success), then ``op__``/``dtype__``/``module__``."""
        mode = () if applied.mode == "mandatory_success" else (self._mark(applied.mode, applied.reason),)
        return mode + tuple(self._mark(name, "") for name in names)

    def _register_marks(self, names: set[str]) -> None:
        # --strict-markers rejects unregistered marks. All at once: pytest re-reads every
        # registered line when it meets an unknown mark name, so one at a time is quadratic
        # (a file over op_db has a thousand op__ marks).
        for name in sorted(names):
            if (name, "") not in self._marks:
                self.config.addinivalue_line("markers", f"{name}: added by testcurator at collection")
        for name in sorted(names):
            self._mark(name, "")

    def _mark(self, name: str, reason: str) -> pytest.MarkDecorator:
        # Built once per (name, reason): 20k items share a few dozen distinct marks, and
        # building a MarkDecorator costs more than applying one.
        key = (name, reason)
        if key not in self._marks:
            if name == "skip":
                self._marks[key] = pytest.mark.skip(reason=reason)
            elif name in XFAIL_MODES:
                self._marks[key] = pytest.mark.xfail(reason=reason, strict=name == "xfail_strict")
            else:  # registered by _register_marks
                self._marks[key] = getattr(pytest.mark, name)
        return self._marks[key]

    def _record_stale(self, seen: dict[Path, set[str]]) -> None:
        # Only files that were collected can have stale entries; others are out of this run.
        # Under --curate-only the tests it does not name are not even instantiated: not stale.
        only = self.config.pluginmanager.get_plugin(ONLY)
        for file in self.loaded.files:
            if file.resolved_path not in seen:
                continue
            named = None if only is None else only.names_in(file.resolved_path)
            names = [n for e in file.entries for n in e.names if n not in seen[file.resolved_path]
                     and (named is None or n in named)]
            if names:
                self.summary.stale[str(file.resolved_path)] = sorted(names)

    # --- reporting, xdist-safe --------------------------------------------------------
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput["testcurator_summary"] = self.summary.to_dict()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        # Every worker collects the same items, so one worker's summary is the run's.
        data = getattr(node, "workeroutput", {}).get("testcurator_summary")
        if data is not None and not self.summary.modes:
            self.summary = CurateSummary.from_dict(data)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from testcurator.plugin.summary import write_summary

        write_summary(terminalreporter, self.summary)


def wholly_skipped(file: ResolvedFile) -> bool:
    """Whether the config skips every test of ``file`` (unlisted and listed alike)."""
    return file.unlisted_test_mode == "skip" and all(entry.mode == "skip" for entry in file.entries)


def _error_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    return errors[-1] if errors else (lines[-1] if lines else "collection failed")


def marks_for(ident: TestIdentity) -> list[str]:
    """``op__<name>``, ``dtype__<name>`` (each dtype), ``module__<name>`` for one identity."""
    marks = []
    if ident.op is not None:
        marks.append(f"op__{ident.op_formatted}")
    # One mark per member of a dtype pair, so ``-m dtype__complex64`` selects every instance
    # that runs complex64.
    marks.extend(f"dtype__{d}" for d in dict.fromkeys(ident.dtypes))
    if ident.module is not None:
        marks.append(f"module__{ident.module.replace('.', '_')}")
    return marks


def junit_properties(ident: TestIdentity, applied: Applied) -> list[tuple[str, str]]:
    props = [("curate_generic", ident.generic), ("curate_mode", applied.mode), ("curate_origin", applied.origin)]
    for key in ("device", "dtype", "op", "op_variant", "module"):
        value = getattr(ident, key)
        if value is not None:
            props.append((f"curate_{key}", str(value)))
    if ident.params:  # refine separates failures by a @parametrize value (edits.params)
        props.append(("curate_params", params_text(ident.params)))
    return props


def add_included_dtypes(cls: type, file: ResolvedFile) -> int:
    """Add ``edits.dtypes.include`` instances to a device-specific class; returns how many."""
    import torch

    wanted = {n: [d.name for d in e.edits.dtypes.include] for e in file.entries if e.edits and e.edits.dtypes for n in e.names}
    wanted = {k: v for k, v in wanted.items() if v}
    if not wanted:
        return 0
    existing = {name: identify(cls, name) for name in dir(cls) if name.startswith("test") and callable(getattr(cls, name, None))}
    present = {(i.generic, i.op_formatted, i.module, i.params, i.dtype) for i in existing.values()}
    added = 0
    for attr, ident in sorted(existing.items()):
        # A dtype pair's instances have no single dtype to swap for another: not extended.
        if ident.generic not in wanted or len(ident.dtypes) != 1 or not attr.endswith(f"_{ident.dtype}"):
            continue
        for dtype in wanted[ident.generic]:
            key = (ident.generic, ident.op_formatted, ident.module, ident.params, dtype)
            new_attr = attr[: -len(ident.dtype)] + dtype
            if key in present or hasattr(cls, new_attr):
                continue
            setattr(cls, new_attr, _retyped(getattr(cls, attr), getattr(torch, dtype)))
            present.add(key)
            added += 1
    return added


def _retyped(instantiated: Any, dtype: Any) -> Any:
    """A copy of an instantiated test that runs with another dtype."""
    kwargs = dict((instantiated.__defaults__ or ({},))[0])
    kwargs["dtype"] = dtype

    @functools.wraps(instantiated)
    def included(self: Any, param_kwargs: dict[str, Any] = kwargs) -> Any:
        return instantiated(self, param_kwargs=param_kwargs)

    setattr(included, INCLUDED_ATTR, True)
    return included
