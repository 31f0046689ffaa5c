"""Re-bucket an existing config from execution results made anywhere (`testcurator refine`).

The production case: the device sits on a CI runner, which uploads JUnit XML (pytest's,
or PyTorch's run_test.py's) or our results.jsonl. Each test with results becomes a refine
request whose previous decision is what the config says now; the brain's refine rules
(agents/offline/brain.py, documented there) decide, and every entry whose mode or edits change
is rewritten with the new reason as its comment. Entries without results are untouched.

Who wrote an entry matters: one the pipeline wrote and nobody changed since (its fingerprint
in ``configs/.emitted.json`` still matches) is a machine's decision, which execution may
overturn (a machine-made xfail that passes everywhere is promoted); an entry a person added
or edited only gets the proposal, for review. Without a readable ``.emitted.json`` every entry
counts as a person's, and the report says so in one line.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from testcurator.agents.brain import BackendContext, Brain, BrainContext, BucketRequest, RefineRequest
from testcurator.agents.decision import CONFIG_BRAIN, Decision
from testcurator.agents.refine import execution_record
from testcurator.config.editor import ConfigEditor, EntrySpec
from testcurator.config.layout import config_path as config_path_of
from testcurator.config.loader import load_config
from testcurator.config.resolve import LoadedConfig, ResolvedEntry, ResolvedFile
from testcurator.pipelines.emit import SIDECAR, entry_for, fingerprint, load_sidecar, save_sidecar
from testcurator.runner.results.records import TestRecord
from testcurator.vocab import TestKey


@dataclass
class RebucketResult:
    changed: list[dict[str, str]] = field(default_factory=list)
    unchanged: int = 0
    unmatched: list[str] = field(default_factory=list)  # result files no config entry lists
    notes: list[str] = field(default_factory=list)  # one line each, for the report
    # Entries kept as they are although execution proposes a change (a person's xfail that
    # passes everywhere): the proposal goes to the report, not into the config.
    proposed: list[dict[str, str]] = field(default_factory=list)


@dataclass
class Emitted:
    """What the pipeline wrote (``configs/.emitted.json``), to tell its untouched entries
    (machine-made: execution may change them, as a brain's) from a person's (only proposed).
    ``sidecar`` None: none found or unreadable, so every entry counts as a person's."""

    configs_dir: Path | None
    sidecar: dict[str, dict[str, str]] | None
    by_config: dict[Path, str] = field(default_factory=dict)  # config file -> upstream rel path
    changed: bool = False

    @classmethod
    def find(cls, config_path: Path, notes: list[str]) -> Emitted:
        start = config_path if config_path.is_dir() else config_path.parent
        configs_dir = next((d for d in (start, *start.parents) if (d / SIDECAR).is_file()), None)
        if configs_dir is None:
            notes.append(f"no {SIDECAR} beside {config_path}: every entry counts as a person's decision "
                         "(an xfail that passes is proposed for promotion, not promoted)")
            return cls(None, None)
        try:
            sidecar = load_sidecar(configs_dir)
            if not isinstance(sidecar, dict) or not all(isinstance(v, dict) for v in sidecar.values()):
                raise ValueError("not an object of objects")
        except (OSError, ValueError) as exc:  # JSONDecodeError is a ValueError
            notes.append(f"{configs_dir / SIDECAR} is unreadable ({exc}): every entry counts as a person's decision")
            return cls(None, None)
        by_config = {config_path_of(configs_dir, rel).resolve(): rel for rel in sidecar}
        return cls(configs_dir, sidecar, by_config)

    def rel(self, entry: ResolvedEntry) -> str | None:
        return self.by_config.get(Path(entry.location.file).resolve())

    def machine_made(self, entry: ResolvedEntry | None, test: str) -> bool:
        """Whether ``entry`` is exactly what the pipeline last wrote for ``test``."""
        rel = self.rel(entry) if entry is not None and self.sidecar is not None else None
        if rel is None or self.sidecar is None:
            return False
        return self.sidecar[rel].get(test) == fingerprint(entry.mode, entry.reason, entry.edits)

    def rewritten(self, entry: ResolvedEntry, test: str, spec: EntrySpec) -> None:
        """The pipeline's entry for ``test`` is now ``spec``: still machine-made."""
        rel = self.rel(entry)
        if rel is not None and self.sidecar is not None:
            self.sidecar[rel][test] = fingerprint(spec.mode, spec.reason, spec.edits)
            self.changed = True

    def save(self) -> None:
        if self.changed and self.configs_dir is not None and self.sidecar is not None:
            save_sidecar(self.configs_dir, self.sidecar)


def _file_for(config: LoadedConfig, nodeid: str) -> ResolvedFile | None:
    parts = Path(TestKey.parse(nodeid).file).parts
    for file in config.files:
        if file.resolved_path.parts[-len(parts):] == parts:
            return file
    return None


def _previous(file: ResolvedFile, test: str, emitted: Emitted) -> tuple[Decision, ResolvedEntry | None]:
    entry = file.entry_for(test)
    if entry is None:
        return Decision(test, file.unlisted_test_mode, "not listed (unlisted_test_mode)", (), CONFIG_BRAIN, None), None
    cut = entry.exclusions()
    return Decision(test, entry.mode, entry.reason or "", (), CONFIG_BRAIN, None, exclude_dtypes=cut.dtypes,
                    exclude_ops=cut.ops, exclude_modules=cut.modules, exclude_params=cut.params,
                    machine_made=emitted.machine_made(entry, test)), entry


def rebucket(config_path: Path, records: Sequence[TestRecord], brain: Brain, backend: BackendContext,
             *, torch_root: Path | None = None) -> RebucketResult:
    """Refine the config at ``config_path`` in place from ``records``."""
    config = load_config(config_path, torch_root=torch_root)
    result = RebucketResult()
    emitted = Emitted.find(config_path, result.notes)
    grouped: dict[tuple[Path, str], list[TestRecord]] = defaultdict(list)
    for rec in records:
        file = _file_for(config, rec.nodeid)
        if file is None or not rec.generic:
            result.unmatched.append(rec.nodeid)
            continue
        grouped[(file.resolved_path, rec.generic)].append(rec)
    known = frozenset(generic for _, generic in grouped)
    ctx = BrainContext(backend, known, torch_root or Path.cwd())
    edits: dict[Path, list[tuple[ResolvedFile, EntrySpec]]] = defaultdict(list)
    for (path, generic), recs in sorted(grouped.items()):
        file = config.file_for(path)
        assert file is not None
        previous, entry = _previous(file, generic, emitted)
        request = RefineRequest(BucketRequest(generic, file.raw_path, ""), previous,
                                tuple(execution_record(r) for r in sorted(recs, key=lambda r: r.nodeid)))
        decision = brain.refine([request], ctx)[0]
        spec = entry_for(decision)
        before = fingerprint(previous.mode, None, entry.edits if entry else None)
        if fingerprint(spec.mode, None, spec.edits) == before:
            result.unchanged += 1
            if decision.needs_review and previous.by_human:
                result.proposed.append({"test": generic, "file": file.raw_path, "mode": previous.mode,
                                        "reason": decision.reason})
            continue
        edits[entry.location.file if entry else file.location.file].append((file, spec))
        if entry is not None and previous.machine_made:
            emitted.rewritten(entry, generic, spec)
        result.changed.append({"test": generic, "file": file.raw_path, "from": previous.mode, "to": spec.mode,
                               "reason": decision.reason})
    for source, changes in sorted(edits.items(), key=lambda kv: str(kv[0])):
        editor = ConfigEditor.open(Path(source))
        for file, spec in changes:
            editor.update(file.raw_path, [spec], unlisted_test_mode=file.unlisted_test_mode)
        editor.save()
    emitted.save()
    return result
