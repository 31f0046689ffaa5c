"""Carry a config over to a new upstream tree: copy it, move entries, drop removed tests.

The configs address files as ``${TORCH_ROOT}/...``, so a copy applies to the new tree as
it is. What the delta says is then applied with :class:`ConfigEditor` (text splices: every
other byte, human comments included, stays): a moved or renamed test's entry goes to its
new name with the same mode and edits, and a removed test's name leaves its entry. The
emit sidecar follows, so an entry the pipeline owned stays the pipeline's to update and a
human's stays the human's.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from testcurator.config.editor import ConfigEditor, EntrySpec
from testcurator.config.layout import config_path, raw_path
from testcurator.config.loader import load_config
from testcurator.config.resolve import LoadedConfig, ResolvedEntry, ResolvedFile
from testcurator.config.profile import BackendProfile
from testcurator.errors import BadInputError
from testcurator.pipelines import emit as emitter
from testcurator.pipelines.upgrade.delta import Move, TestDelta
from testcurator.vocab import TestKey


def copy_configs(src: Path, dst: Path) -> None:
    """Replace ``dst`` by a copy of ``src`` (whole, or not at all)."""
    if not src.is_dir():
        raise BadInputError(f"--config must be a directory of configs (testcurator run's configs/): {src}")
    if src.resolve() == dst.resolve():
        return  # upgrading in place
    tmp = dst.with_name(f".{dst.name}.upgrade-tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    old = dst.with_name(f".{dst.name}.upgrade-old")
    if dst.exists():
        shutil.rmtree(old, ignore_errors=True)
        dst.rename(old)
    tmp.rename(dst)
    shutil.rmtree(old, ignore_errors=True)


@dataclass
class CarryResult:
    carried: list[dict[str, str]] = field(default_factory=list)  # moved tests that had an entry
    dropped: list[dict[str, str]] = field(default_factory=list)  # removed tests that had an entry
    written: list[str] = field(default_factory=list)


def _files_by_rel(loaded: LoadedConfig, root: Path) -> dict[str, ResolvedFile]:
    out: dict[str, ResolvedFile] = {}
    for file in loaded.files:
        try:
            out[file.resolved_path.resolve().relative_to(root.resolve()).as_posix()] = file
        except ValueError:
            continue  # a file outside the tree: not the delta's business
    return out


def _entry(files: dict[str, ResolvedFile], key: str) -> tuple[ResolvedFile, ResolvedEntry] | None:
    test = TestKey.parse(key)
    file = files.get(test.file)
    entry = file.entry_for(test.name) if file is not None else None
    return None if entry is None or file is None else (file, entry)


def _owner(sidecar: dict[str, dict[str, str]], key: str, entry: ResolvedEntry) -> str:
    test = TestKey.parse(key)
    mine = sidecar.get(test.file, {}).get(test.name) == emitter.fingerprint(entry.mode, entry.reason, entry.edits)
    return "pipeline" if mine else "human"


def _moved_spec(move: Move, entry: ResolvedEntry) -> EntrySpec:
    note = f"Carried over from {move.old} ({move.kind}: same content, not re-evaluated)."
    reason = f"{entry.reason} {note}" if entry.reason else note
    return EntrySpec((TestKey.parse(move.new).name,), entry.mode, reason, emitter._edits(entry.edits))


def carry_over(configs_dir: Path, root: Path, profile: BackendProfile, delta: TestDelta) -> CarryResult:
    """Apply the delta's moves and removals to the configs under ``configs_dir``."""
    result = CarryResult()
    if not (delta.moved or delta.removed) or not any(configs_dir.rglob("*.yaml")):
        return result  # nothing to carry: loading every config to find that out cost a second at 300 files
    files = _files_by_rel(load_config(configs_dir, torch_root=root), root)
    sidecar = emitter.load_sidecar(configs_dir)
    specs: dict[str, list[EntrySpec]] = defaultdict(list)
    drops: dict[str, list[str]] = defaultdict(list)
    for move in delta.moved:
        found = _entry(files, move.old)
        if found is None:
            continue  # it had no entry: its file's unlisted mode decided, and still does
        owner = _owner(sidecar, move.old, found[1])
        spec = _moved_spec(move, found[1])
        old, new = TestKey.parse(move.old), TestKey.parse(move.new)
        specs[new.file].append(spec)
        drops[old.file].append(old.name)
        sidecar.get(old.file, {}).pop(old.name, None)
        if owner == "pipeline":
            sidecar.setdefault(new.file, {})[new.name] = emitter.fingerprint(spec.mode, spec.reason, spec.edits)
        result.carried.append({"old": move.old, "new": move.new, "kind": move.kind, "mode": spec.mode, "owner": owner})
    for key in delta.removed:
        found = _entry(files, key)
        if found is None:
            continue
        test = TestKey.parse(key)
        drops[test.file].append(test.name)
        result.dropped.append({"test": key, "mode": found[1].mode, "owner": _owner(sidecar, key, found[1])})
        sidecar.get(test.file, {}).pop(test.name, None)
    for rel in sorted(set(specs) | set(drops)):
        _edit(configs_dir, files.get(rel), rel, profile, specs.get(rel, []), drops.get(rel, []), result)
    emitter.save_sidecar(configs_dir, {k: dict(sorted(v.items())) for k, v in sidecar.items() if v})
    return result


def _edit(configs_dir: Path, file: ResolvedFile | None, rel: str, profile: BackendProfile,
          specs: Sequence[EntrySpec], drop: Sequence[str], result: CarryResult) -> None:
    if file is not None:
        path, raw = Path(file.location.file), file.raw_path
    else:
        path, raw = config_path(configs_dir, rel), raw_path(rel)
    if path.exists():
        editor = ConfigEditor.open(path)
    else:
        editor = ConfigEditor.new(path, header=emitter.HEADER, global_=emitter.capabilities(profile))
    editor.update(raw, list(specs), drop=list(drop), unlisted_test_mode="skip")
    if editor.save():
        result.written.append(path.relative_to(configs_dir).as_posix())

