"""``testcurator enable-op OP``: admit the tests held back only by OP, as a config delta.

Which tests exercise OP comes from the op map in the state dir (memory/opmap.py): the
aten ops each test dispatched under the capture run, and the OpInfo op of every ``@ops``
instance (static map); a failure on the device that named ``aten::OP`` counts too, since
the device may decompose into ops the CPU capture never saw. Of those, a test is *held back only by OP* when its config entry:

- excludes OP in ``edits.ops.exclude`` (the OpInfo variants of OP were cut off): admitted
  by removing OP from that list;
- is ``skip`` / ``xfail`` / ``xfail_strict`` with a reason whose ATen ops (``aten::name``)
  are OP and nothing else (the failure class named one missing op): admitted as
  ``mandatory_success``. A reason naming other ops too is not admitted (still held back);
- or is an ``@ops`` instance of OP in a config whose ``global.supported_ops`` is declared
  and lacks OP: admitted by adding OP to that list (one line per config file).

Each admitted entry's comment starts with ``Admitted by enable-op OP``; the pipeline then
treats it as a human decision (it survives regeneration), which is what enabling an op is.
With ``execute``, only the admitted tests run on the device: what passes stays admitted,
an entry whose tests fail becomes ``xfail_strict`` (an exclusion is put back), its reason
carrying the failure class and evidence.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

from testcurator.config.editor import ConfigEditor, EntrySpec
from testcurator.config.loader import load_config
from testcurator.config.resolve import ResolvedEntry, ResolvedFile
from testcurator.config.review import review_paths
from testcurator.config.review_render import render
from testcurator.config.schema import OpRef
from testcurator.errors import BadInputError, MissingPathError
from testcurator.memory.opmap import OpMap
from testcurator.pipelines import emit as emitter
from testcurator.pipelines.context import Say
from testcurator.pipelines.enable_op.admission import Admission, EnableOptions, EnableResult
from testcurator.pipelines.enable_op.execute import run_admitted
from testcurator.pipelines.enable_op.supported import add_supported_op
from testcurator.pipelines.enable_op.probe import Admitting, check_admissions, refused_reason
from testcurator.vocab import HELD_BACK_MODES, TestKey, op_key

_ATEN = re.compile(r"aten::([A-Za-z_][\w]*)")


def _base(op: str) -> str:
    return op_key(op).split(".", 1)[0]


def exercising(state_dir: Path, op: str) -> tuple[set[str], set[str]]:
    """``file::generic`` of the tests using ``op``: any source, and as their OpInfo op (``@ops``)."""
    opmap = OpMap(state_dir)
    if not opmap.exists():
        raise MissingPathError(opmap.path, "op map (run `testcurator run` first, or `testcurator ops ingest`)")
    try:
        queries = {op, f"aten::{op_key(op)}"} if "::" not in op else {op, op_key(op)}
        hits = [h for q in queries for h in opmap.tests_for(q)]
    finally:
        opmap.close()
    key = lambda h: str(TestKey.of(TestKey.parse(h.nodeid).file, h.generic))
    return {key(h) for h in hits}, {key(h) for h in hits if h.op == op_key(op)}


def _rel(file: ResolvedFile, root: Path) -> str | None:
    try:
        return file.resolved_path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None


def _spec(entry: ResolvedEntry, names: tuple[str, ...] | None = None, **change: Any) -> EntrySpec:
    edits = emitter._edits(entry.edits)
    base = EntrySpec(names or entry.names, entry.mode, entry.reason, edits)
    return EntrySpec(change.get("names", base.names), change.get("mode", base.mode),
                     change.get("reason", base.reason), change.get("edits", base.edits))


def _without_op(edits: dict[str, Any], op: str) -> dict[str, Any] | None:
    ops = [o for o in edits["ops"]["exclude"] if o["name"] != op]
    out = {k: v for k, v in edits.items() if k != "ops"}
    if ops:
        out["ops"] = {"exclude": ops}
    return out or None


def _judge(op: str, file: ResolvedFile, entry: ResolvedEntry, name: str, key: str,
           result: EnableResult) -> Admission | None:
    yaml, note = entry.location.file, f"Admitted by enable-op {op}"
    excluded = [o.name for o in (entry.edits.ops.exclude if entry.edits and entry.edits.ops else [])]
    if op_key(op) in excluded:
        edits = _without_op(emitter._edits(entry.edits), op_key(op))
        reason = f"{note}: its {op_key(op)} variants run again. Before: {entry.reason or 'no reason'}"
        return Admission(key, "ops_exclude", yaml, file.raw_path, entry.mode,
                         _spec(entry, reason=reason, edits=edits), _spec(entry))
    if entry.mode not in HELD_BACK_MODES:
        return None
    named = {m for m in _ATEN.findall(entry.reason or "")}
    if not named or _base(op) not in named:
        return None
    if named != {_base(op)}:
        result.still_held.append({"test": key, "mode": entry.mode, "also": ", ".join(sorted(named - {_base(op)}))})
        return None
    reason = f"{note}: {entry.mode} only because aten::{_base(op)} was missing. Before: {entry.reason}"
    return Admission(key, "mode", yaml, file.raw_path, entry.mode,
                     _spec(entry, names=(name,), mode="mandatory_success", reason=reason), _spec(entry, names=(name,)))


def find_admissions(opts: EnableOptions, root: Path) -> EnableResult:
    result = EnableResult(opts.op)
    users, opinfo_users = exercising(opts.state_dir, opts.op)
    loaded = load_config(opts.config, torch_root=root)
    for file in loaded.files:
        rel = _rel(file, root)
        if rel is None:
            continue  # a file outside the torch root: no test of it is in the op map
        declared = file.capabilities.supported_ops
        lacks = declared is not None and op_key(opts.op) not in {o.name for o in declared}
        for entry in file.entries:
            for name in entry.names:
                key = str(TestKey.of(rel, name))
                # Exercising OP: the op map says so, or the device's own failure named it (a CPU
                # capture can miss an op the device decomposes into, e.g. layer_norm there).
                named = _base(opts.op) in _ATEN.findall(entry.reason or "")
                if (key not in users and not named) or key in {a.key for a in result.admitted}:
                    continue
                admission = _judge(opts.op, file, entry, name, key, result)
                if admission is None and lacks and key in opinfo_users and entry.mode == "mandatory_success":
                    # Its OP instances were not run for want of the capability: adding it admits them.
                    admission = Admission(key, "supported_ops", entry.location.file, file.raw_path, entry.mode,
                                          None, _spec(entry, names=(name,)))
                if admission is not None:
                    result.admitted.append(admission)
                    if file.capabilities.supported_dtypes is not None:  # the others do not run
                        result.run_dtypes[key] = frozenset(d.name for d in file.capabilities.supported_dtypes)
    return result


def apply(configs: Path, admissions: list[Admission], op: str) -> None:
    """Write the admissions into the configs under ``configs`` (paths re-rooted there)."""
    by_file: dict[tuple[str, str], list[EntrySpec]] = defaultdict(list)
    for adm in admissions:
        if adm.spec is not None:
            by_file[(adm.yaml, adm.raw_path)].append(adm.spec)
    for yaml in sorted({a.yaml for a in admissions if a.kind == "supported_ops"}):
        add_supported_op(Path(yaml), op_key(op), f"Admitted by enable-op {op}")
    for (yaml, raw), specs in sorted(by_file.items()):
        editor = ConfigEditor.open(Path(yaml))
        editor.update(raw, specs, unlisted_test_mode="skip")
        editor.save()


def enable_op(opts: EnableOptions, say: Say) -> EnableResult:
    """Find, show and (unless ``dry_run``) write the admissions; validate them with ``execute``."""
    if not opts.config.is_dir():
        raise BadInputError(f"--config must be a configs directory: {opts.config}")
    root = _torch_root(opts)
    result = find_admissions(opts, root)
    if result.admitted and opts.backend is not None and opts.probe:
        _consult_table(opts, result, say)
    elif result.admitted and opts.probe:
        say("warning: the capability table was not consulted (pass --backend backend.yaml to check the admitted "
            "tests' calls on the device first)")
    with tempfile.TemporaryDirectory(prefix="enable-op-") as tmp:
        before = Path(tmp) / "before"
        shutil.copytree(opts.config, before)
        if not opts.dry_run and result.admitted:
            apply(opts.config, result.admitted, opts.op)
            if opts.execute:
                run_admitted(opts, root, result, say)
        target = before if opts.dry_run else opts.config
        if opts.dry_run and result.admitted:
            shadow = Path(tmp) / "after"
            shutil.copytree(opts.config, shadow)
            apply(shadow, [_rebase(a, opts.config, shadow) for a in result.admitted], opts.op)
            target = shadow
        report = review_paths(str(before), str(target))
        # The sides are copies in a temporary folder: name the configs they stand for.
        after = f"{opts.config} with {opts.op} enabled" + (" (--dry-run: not written)" if opts.dry_run else "")
        result.diff = render(replace(report, old_label=str(opts.config), new_label=after), "markdown")
    say(result.diff)
    if result.admitted:
        files = ", ".join(sorted({a.yaml for a in result.admitted}))
        say(f"{'would change (--dry-run)' if opts.dry_run else 'changed'}: {files}")
    return result


def _excluded(spec: EntrySpec | None, dim: str) -> tuple[str, ...]:
    edits = (spec.edits if spec is not None else None) or {}
    items = (edits.get(dim) or {}).get("exclude", [])
    if dim == "ops":  # an op may be excluded at some dtypes only
        return tuple(e for item in items for e in OpRef.model_validate(item).entries())
    return tuple(item["name"] for item in items)


def _consult_table(opts: EnableOptions, result: EnableResult, say: Say) -> None:
    """Drop the admissions whose admitted instances make a call the device still lacks."""
    assert opts.backend is not None
    admitting = [Admitting(a.key, None if a.kind == "mode" else op_key(opts.op),
                           *(_excluded(a.spec or a.original, dim) for dim in ("dtypes", "ops", "modules")),
                           run_dtypes=result.run_dtypes.get(a.key)) for a in result.admitted]
    check = check_admissions(admitting, opts.op, opts.backend, opts.state_dir, say)
    result.table = {call: r.status for call, r in check.rows.items()}
    for adm in [a for a in result.admitted if a.key in check.refused]:
        result.admitted.remove(adm)
        result.still_held.append({"test": adm.key, "mode": adm.old_mode, "also": refused_reason(check.refused[adm.key])})


def _rebase(adm: Admission, old: Path, new: Path) -> Admission:
    yaml = new / Path(adm.yaml).resolve().relative_to(old.resolve())
    return Admission(adm.key, adm.kind, str(yaml), adm.raw_path, adm.old_mode, adm.spec, adm.original)


def _torch_root(opts: EnableOptions) -> Path:
    if opts.torch_root is not None:
        if not opts.torch_root.is_dir():
            raise MissingPathError(opts.torch_root, "torch root")
        return opts.torch_root.resolve()
    from testcurator.memory.api import Memory

    with Memory.open(opts.state_dir) as memory:
        root = memory.torch_root
    if root is None:
        raise BadInputError(f"no torch root recorded in the memory at {opts.state_dir}; pass --torch-root")
    return root
