"""What the config says about one instantiated test: the single place outcomes are decided.

The plugin calls :func:`decide` for every collected item; the runner and the pipeline use
it to predict outcomes without running pytest. Order of precedence (first that applies):

1. the file is not listed -> the config's ``unlisted_file_mode``;
2. an ``edits`` exclusion of the item's dtype, op, module or a @parametrize value -> ``skip``
   (that instance only);
3. a declared capability the item needs and the backend lacks -> ``skip``, naming it
   (a dtype added by ``edits.dtypes.include`` is taken as declared by that entry);
4. the entry's mode, or the file's ``unlisted_test_mode`` when no entry names the test.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from testcurator.config.resolve import LoadedConfig, ResolvedEntry, ResolvedFile
from testcurator.config.params import excluded_param
from testcurator.config.schema import Capabilities, DtypeRef, Edits, OpRef
from testcurator.errors import Location
from testcurator.names import TestIdentity


#: How the skips this module decides itself are worded (an edit's exclusion, a capability the
#: config does not declare; the config's place follows in parentheses): readers of a run's
#: records tell the config's own skips from a test's by it (refine, the reason check).
OWN_SKIP = re.compile(r"^(?P<what>.+? (?P<how>excluded by edits|is not in supported_(?:dtypes|ops)"
                      r"|is not supported for dtype \w+))(?: \(|$)")


@dataclass(frozen=True, slots=True)
class Applied:
    """The outcome the config assigns to one instantiated test, and why."""

    mode: str
    reason: str
    origin: str  # entry | unlisted_test | unlisted_file | edit | capability | probe (tier L3)
    location: Location | None = None

    @property
    def curated(self) -> str:
        """A short label for summaries: the mode, or ``skip (edit)`` style for derived skips."""
        return self.mode if self.origin in ("entry", "unlisted_test", "unlisted_file") else f"{self.mode} ({self.origin})"


def _norm(name: str) -> str:
    return name.replace(".", "_")


def op_ref_matches(ref_name: str, ident: TestIdentity) -> bool:
    """Whether a config ``OpRef`` names the instance's OpInfo op: ``add`` matches every
    variant of add; ``sum_variant`` matches that variant only."""
    if ident.op is None:
        return False
    return _norm(ref_name) in {_norm(ident.op), _norm(ident.op_formatted or "")}


def excluded_by_edit(edits: Edits | None, ident: TestIdentity) -> str | None:
    if edits is None:
        return None
    if edits.dtypes is not None:
        for ref in edits.dtypes.exclude:
            if ref.name in ident.dtypes:
                return f"dtype {ref.name} excluded by edits"
    if edits.ops is not None:
        for op in edits.ops.exclude:
            if op_ref_matches(op.name, ident) and _op_dtype_applies(op, ident):
                return f"op {op.name} excluded by edits"
    if edits.modules is not None and ident.module is not None:
        for mod in edits.modules.exclude:
            if _norm(mod.name) == _norm(ident.module):
                return f"module {mod.name} excluded by edits"
    param = excluded_param(edits, ident)
    return f"parameter {param} excluded by edits" if param else None


def _op_dtype_applies(op: OpRef, ident: TestIdentity) -> bool:
    # An excluded op with dtypes excludes only those dtypes of it.
    return op.dtypes is None or any(d.name in ident.dtypes for d in op.dtypes)


# supported_ops by normalized name, per list (kept alive here, so an id is never reused):
# a linear scan per instance was a third of the plugin's cost on a 25,000-instance file.
_OP_INDEX: dict[int, tuple[Sequence[OpRef], dict[str, tuple[int, OpRef]]]] = {}


_NAMES: dict[int, tuple[Sequence[DtypeRef], frozenset[str]]] = {}


def _names(refs: Sequence[DtypeRef]) -> frozenset[str]:
    cached = _NAMES.get(id(refs))
    if cached is None or cached[0] is not refs:
        cached = _NAMES[id(refs)] = (refs, frozenset(d.name for d in refs))
    return cached[1]


def _supported_op(supported: Sequence[OpRef], ident: TestIdentity) -> OpRef | None:
    """The first ``supported_ops`` entry that :func:`op_ref_matches` the instance's op."""
    cached = _OP_INDEX.get(id(supported))
    if cached is None or cached[0] is not supported:
        index: dict[str, tuple[int, OpRef]] = {}
        for pos, ref in enumerate(supported):
            index.setdefault(_norm(ref.name), (pos, ref))
        cached = _OP_INDEX[id(supported)] = (supported, index)
    hits = [cached[1][key] for key in {_norm(ident.op or ""), _norm(ident.op_formatted or "")} if key in cached[1]]
    return min(hits, key=lambda hit: hit[0])[1] if hits else None


def _unsupported(caps: Capabilities, ident: TestIdentity, included: Collection[str]) -> str | None:
    dtypes = ident.dtypes
    if caps.supported_dtypes is not None:
        for name in dtypes:
            if name not in _names(caps.supported_dtypes) and name not in included:
                return f"dtype {name} is not in supported_dtypes"
    if caps.supported_ops is not None and ident.op is not None:
        ref = _supported_op(caps.supported_ops, ident)
        if ref is None:
            return f"op {ident.op} is not in supported_ops"
        if ref.dtypes is not None:
            allowed = {d.name for d in ref.dtypes}
            for name in dtypes:
                if name not in allowed:
                    return f"op {ident.op} is not supported for dtype {name}"
    return None


def _included_dtypes(entry: ResolvedEntry | None) -> list[str]:
    if entry is None or entry.edits is None or entry.edits.dtypes is None:
        return []
    return [d.name for d in entry.edits.dtypes.include]


def decide(config: LoadedConfig, file: ResolvedFile | None, ident: TestIdentity) -> Applied:
    """The outcome ``config`` gives the test ``ident`` collected from ``file``."""
    if file is None:
        mode = config.unlisted_file_mode
        return Applied(mode, f"file not listed in the curate config (unlisted_file_mode: {mode})", "unlisted_file")
    entry = file.entry_for(ident.generic)
    where = entry.location if entry is not None else file.location
    excluded = excluded_by_edit(entry.edits if entry else None, ident)
    if excluded is not None:
        return Applied("skip", f"{excluded} ({where})", "edit", where)
    missing = _unsupported(file.capabilities, ident, _included_dtypes(entry))
    if missing is not None:
        return Applied("skip", f"{missing} ({file.location.file})", "capability", file.location)
    if entry is None:
        mode = file.unlisted_test_mode
        return Applied(mode, f"not listed in the curate config (unlisted_test_mode: {mode})", "unlisted_test", file.location)
    reason = entry.reason or f"curated as {entry.mode}"
    return Applied(entry.mode, f"{reason} ({entry.location})", "entry", entry.location)


def decision_key(file: ResolvedFile | None, ident: TestIdentity) -> tuple[object, ...]:
    """What of ``ident`` :func:`decide` reads in ``file``: instances equal on it get the same
    outcome, so a caller decides once per key (the plugin, for 25,000 instances of one file).

    The test's name always; its dtype, op, module and @parametrize values only where an edit
    of its entry or a declared capability of the file looks at them."""
    if file is None:
        return (None,)
    entry = file.entry_for(ident.generic)
    edits = entry.edits if entry is not None else None
    caps = file.capabilities
    ops = caps.supported_ops is not None or (edits is not None and edits.ops is not None)
    dtypes = ops or caps.supported_dtypes is not None or (edits is not None and edits.dtypes is not None)
    modules = edits is not None and edits.modules is not None
    params = edits is not None and edits.params is not None
    return (id(file), ident.generic, ident.dtype if dtypes else None, (ident.op, ident.op_variant) if ops else None,
            ident.module if modules else None, ident.params if params else None)


def probe(applied: Applied) -> Applied:
    """Tier L3: what the config holds back runs as a strict-xfail probe, so an unexpected
    pass says it newly works. Skips from an edit or a missing capability, and ``xfail``
    entries, become ``xfail_strict``; everything else is unchanged."""
    if applied.mode == "xfail" or (applied.mode == "skip" and applied.origin in ("edit", "capability")):
        return Applied("xfail_strict", f"L3 probe (was {applied.mode}): {applied.reason}", "probe", applied.location)
    return applied
