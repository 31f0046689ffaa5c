"""Re-bucket an existing config from execution results made anywhere (`testcurator refine`).

The production case: the device sits on a CI runner, which uploads JUnit XML (pytest's,
or PyTorch's run_test.py's) or our results.jsonl. Each test with results becomes a refine
request whose previous decision is what the config says now; the brain's refine rules
(agents/offline.py, documented there) decide, and every entry whose mode or edits change
is rewritten with the new reason as its comment. Entries without results are untouched.
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
from testcurator.config.loader import LoadedConfig, ResolvedEntry, ResolvedFile, load_config
from testcurator.pipelines.emit import entry_for, fingerprint
from testcurator.runner.records import TestRecord
from testcurator.vocab import TestKey


@dataclass
class RebucketResult:
    changed: list[dict[str, str]] = field(default_factory=list)
    unchanged: int = 0
    unmatched: list[str] = field(default_factory=list)  # result files no config entry lists


def _file_for(config: LoadedConfig, nodeid: str) -> ResolvedFile | None:
    parts = Path(TestKey.parse(nodeid).file).parts
    for file in config.files:
        if file.resolved_path.parts[-len(parts):] == parts:
            return file
    return None


def _previous(file: ResolvedFile, test: str) -> tuple[Decision, ResolvedEntry | None]:
    entry = file.entry_for(test)
    if entry is None:
        return Decision(test, file.unlisted_test_mode, "not listed (unlisted_test_mode)", (), CONFIG_BRAIN, None), None
    edits = entry.edits
    dtypes = tuple(d.name for d in edits.dtypes.exclude) if edits and edits.dtypes else ()
    ops = tuple(o.name for o in edits.ops.exclude) if edits and edits.ops else ()
    modules = tuple(m.name for m in edits.modules.exclude) if edits and edits.modules else ()
    return Decision(test, entry.mode, entry.reason or "", (), CONFIG_BRAIN, None, exclude_dtypes=dtypes, exclude_ops=ops,
                    exclude_modules=modules), entry


def rebucket(config_path: Path, records: Sequence[TestRecord], brain: Brain, backend: BackendContext,
             *, torch_root: Path | None = None) -> RebucketResult:
    """Refine the config at ``config_path`` in place from ``records``."""
    config = load_config(config_path, torch_root=torch_root)
    result = RebucketResult()
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
        previous, entry = _previous(file, generic)
        request = RefineRequest(BucketRequest(generic, file.raw_path, ""), previous,
                                tuple(execution_record(r) for r in sorted(recs, key=lambda r: r.nodeid)))
        decision = brain.refine([request], ctx)[0]
        spec = entry_for(decision)
        before = fingerprint(previous.mode, None, entry.edits if entry else None)
        if fingerprint(spec.mode, None, spec.edits) == before:
            result.unchanged += 1
            continue
        edits[entry.location.file if entry else file.location.file].append((file, spec))
        result.changed.append({"test": generic, "file": file.raw_path, "from": previous.mode, "to": spec.mode,
                               "reason": decision.reason})
    for source, changes in sorted(edits.items(), key=lambda kv: str(kv[0])):
        editor = ConfigEditor.open(Path(source))
        for file, spec in changes:
            editor.update(file.raw_path, [spec], unlisted_test_mode=file.unlisted_test_mode)
        editor.save()
    return result
