"""Stage 2 for a delta run (``testcurator upgrade``): index everything, capture only the delta.

The tree-sitter index is refreshed over every kept file (it is incremental, and pruning
would drop the files the delta does not touch). Collection and the CPU op capture, the
costly parts, run only over the files that hold a delta test, in one pytest process that
runs only the delta tests' instances (a config skips the rest). Records of other tests
are never re-ingested, so the op map keeps what the last full run captured.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from testcurator.memory import stage as memory_stage
from testcurator.config.editor import ConfigEditor, EntrySpec
from testcurator.config.yamlio import atomic_write_text
from testcurator.errors import ExecutionError
from testcurator.memory.api import build
from testcurator.memory.opmap import OpMap
from testcurator.pipelines import emit as emitter
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.store import RunStore


def _key(row: dict[str, Any]) -> str:
    return f"{row['nodeid'].split('::', 1)[0]}::{row['generic']}"


def _delta_rows(ctx: RunContext, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    wanted = ctx.only_tests or frozenset()
    return [r for r in rows if _key(r) in wanted]


def _selection_config(ctx: RunContext, store: RunStore, files: Sequence[str]) -> Path:
    """A config that runs the delta's tests and skips every other test of ``files``."""
    folder = store.path("capture-config")
    for rel in files:
        generics = sorted(k.split("::", 1)[1] for k in ctx.only_tests or () if k.startswith(rel + "::"))
        editor = ConfigEditor.new(emitter.config_path(folder, rel))
        editor.update(emitter.raw_path(rel), [EntrySpec((g,), "mandatory_success") for g in generics])
        editor.save()
    return folder


def captured_delta(ctx: RunContext, store: RunStore, files: Sequence[str]) -> Path | None:
    """Run the delta tests once on CPU under the capture mode (cached by content and delta).

    One pytest process collects the touched files and runs only the delta's instances (the
    curate plugin skips the rest), instead of a collect-only pass and a run.
    """
    if not files:
        return None
    digest = hashlib.sha256(memory_stage._content_key(ctx, files).encode())
    digest.update("\n".join(sorted(ctx.only_tests or ())).encode())
    cache = ctx.state_dir / "capture" / f"delta-{digest.hexdigest()[:24]}.jsonl"
    if not cache.exists():
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(".part")
        extra = [f"--curate-capture-ops={tmp}", f"--curate-timeout={memory_stage.CAPTURE_TIMEOUT}",
                 "--curate-config", str(_selection_config(ctx, store, files)), "--curate-torch-root", str(ctx.torch_root),
                 # -k deselects (cheap) what the config would only skip (a report per test); it
                 # matches substrings, so it may keep a few more, which the config then skips.
                 "-k", " or ".join(sorted({k.rsplit("::", 1)[1] for k in ctx.only_tests or ()}))]
        if ctx.workers > 1:
            extra += ["-n", str(ctx.workers)]
        memory_stage._pytest(ctx, files, extra, store.path("capture.log"))  # test failures are evidence
        parts = sorted(tmp.parent.glob(tmp.name + "*"))
        if not parts:
            raise ExecutionError(f"the delta's op capture wrote nothing; see {store.path('capture.log')}")
        rows = memory_stage.read_records(parts)
        for part in parts:
            part.unlink()
        # Only the delta's own records: the others were skipped and must not replace what
        # the last full run captured for them.
        atomic_write_text(cache, "".join(json.dumps(r, sort_keys=True) + "\n" for r in _delta_rows(ctx, rows)))
    out = store.path("captured.jsonl")
    shutil.copyfile(cache, out)
    return out


def run_delta_memory_stage(ctx: RunContext, store: RunStore, files: Sequence[str]) -> dict[str, Any]:
    """Memory for a delta run; same figures as ``run_memory_stage`` plus the delta's size."""
    stats = build(ctx.torch_root, list(files), ctx.state_dir, embed=ctx.embed)
    touched = ctx.run_files(files)
    if ctx.capture_ops:
        source = captured_delta(ctx, store, touched)
    else:  # no execution wanted: the collect-only pass gives the instances (static map)
        source = memory_stage.static_map(ctx, store, touched) if touched else None
    rows = _delta_rows(ctx, memory_stage.read_records([source]))
    if rows:
        delta = store.path("delta-ops.jsonl")
        atomic_write_text(delta, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
        opmap = OpMap(ctx.state_dir)
        try:
            opmap.ingest(delta)
        finally:
            opmap.close()
    store.write_json("evidence.json", memory_stage.evidence(rows))
    return {"files": stats.files_total, "parsed": stats.files_parsed, "tests": stats.tests_total,
            "failed_files": [f"{path}: {why}" for path, why in stats.failures], "captured": ctx.capture_ops,
            "delta_files": len(touched), "delta_tests": len(ctx.only_tests or ())}
