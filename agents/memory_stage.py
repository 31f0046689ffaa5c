"""Stage 2, memory: index the kept files and map their tests to ops.

Three sources, each cheap on a rerun:
1. the tree-sitter index, summaries and embeddings (testcurator.memory.builder, incremental);
   with the LLM brain on, the model writes the summaries (agents/llm_summaries.py) before
   they are embedded;
2. a collect-only pass with the capture plugin: every instance's generic name, device,
   dtype, OpInfo op and ModuleInfo, before anything runs (the static op map);
3. one execution on CPU under the op-capturing TorchDispatchMode: the aten ops each test
   really dispatches, and whether it passes on the reference device. Cached by the content
   of the kept files and the torch version, so an unchanged tree is not run again.
The per-test evidence the bucket stage needs is written to ``evidence.json``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from testcurator.memory.api import build
from testcurator.memory.opmap import OpMap
from testcurator.memory.static import QUIET_PLUGINS, collect_static, reference_env
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.store import RunStore

CAPTURE_TIMEOUT = 120.0


def _pytest(ctx: RunContext, files: Sequence[str], extra: Sequence[str], log: Path) -> int:
    cmd = [sys.executable, "-m", "pytest", "-q", *QUIET_PLUGINS, *extra, *files]
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.run(cmd, cwd=ctx.torch_root, stdout=out, stderr=subprocess.STDOUT,
                              env=reference_env(), check=False)
    return proc.returncode


def _content_key(ctx: RunContext, files: Sequence[str]) -> str:
    import torch

    digest = hashlib.sha256(torch.__version__.encode())
    for rel in files:
        digest.update(rel.encode() + b"\0" + (ctx.torch_root / rel).read_bytes())
    return digest.hexdigest()[:24]


def static_map(ctx: RunContext, store: RunStore, files: Sequence[str]) -> Path:
    """Collect-only with the capture plugin: one JSON line per instance, no execution."""
    out = store.path("static.jsonl")
    if out.exists():
        return out
    return collect_static(ctx.torch_root, files, out, store.path("static.log"))


def captured_map(ctx: RunContext, store: RunStore, files: Sequence[str]) -> Path | None:
    """Run the kept tests once on CPU under the capture mode (cached by content)."""
    if not ctx.capture_ops:
        return None
    cache = ctx.state_dir / "capture" / f"{_content_key(ctx, files)}.jsonl"
    out = store.path("captured.jsonl")
    if not cache.exists():
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(".part")
        extra = [f"--curate-capture-ops={tmp}", f"--curate-timeout={CAPTURE_TIMEOUT}"]
        if ctx.workers > 1:
            extra += ["-n", str(ctx.workers)]
        _pytest(ctx, files, extra, store.path("capture.log"))  # test failures are evidence, not errors
        parts = sorted(tmp.parent.glob(tmp.name + "*"))
        if not parts:
            ctx.say(f"warning: op capture wrote nothing; see {store.path('capture.log')}")
            return None
        with cache.with_suffix(".tmp").open("w", encoding="utf-8") as joined:
            for part in parts:
                joined.write(part.read_text(encoding="utf-8"))
                part.unlink()
        cache.with_suffix(".tmp").replace(cache)
    shutil.copyfile(cache, out)
    return out


def read_records(paths: Sequence[Path | None]) -> list[dict[str, Any]]:
    """Capture records from JSON-lines files (absent ones are skipped)."""
    rows = []
    for path in paths:
        if path is None or not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a line cut by a crash mid-write
    return rows


def evidence(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per ``file::generic``: OpInfo ops, dtypes, modules, instances, aten ops, CPU outcomes."""
    agg: dict[str, dict[str, Any]] = defaultdict(lambda: {"ops": set(), "dtypes": set(), "modules": set(),
                                                          "aten": set(), "instances": set(), "cpu": {}})
    for row in records:
        file = row["node_id"].split("::", 1)[0]
        entry = agg[f"{file}::{row['generic']}"]
        entry["instances"].add(row["node_id"])
        for key, field in (("ops", "op"), ("dtypes", "dtype"), ("modules", "module")):
            if row.get(field):
                entry[key].add(row[field])
        if row.get("source") == "captured":
            entry["aten"].update(row.get("aten") or ())
            if row.get("outcome"):
                entry["cpu"][row["node_id"]] = row["outcome"]
    return {key: {k: (sorted(v) if isinstance(v, set) else dict(sorted(v.items())) if isinstance(v, dict) else v)
                  for k, v in value.items()} for key, value in sorted(agg.items())}


def run_memory_stage(ctx: RunContext, store: RunStore, files: Sequence[str]) -> dict[str, Any]:
    """Build or refresh memory for ``files``; returns build figures for the report."""
    # Embeddings after the summaries: with the LLM brain on, the model writes them.
    stats = build(ctx.torch_root, list(files), ctx.state_dir, embed=False)
    summaries = _summaries(ctx, files)
    static = static_map(ctx, store, files)
    captured = captured_map(ctx, store, files)
    opmap = OpMap(ctx.state_dir)
    for path in (static, captured):
        if path is not None:
            opmap.ingest(path)
    store.write_json("evidence.json", evidence(read_records([static, captured])))
    return {"files": stats.files_total, "parsed": stats.files_parsed, "tests": stats.tests_total,
            "failed_files": [f"{path}: {why}" for path, why in stats.failures], "captured": captured is not None,
            **summaries}


def _summaries(ctx: RunContext, files: Sequence[str]) -> dict[str, int]:
    """LLM-written summaries when the brain writes them, else the offline ones (and the
    embeddings of whichever is current)."""
    from testcurator.agents.llm_summaries import drop_llm_summaries, write_llm_summaries

    if getattr(ctx.brain, "writes_summaries", False):
        return write_llm_summaries(ctx.brain, ctx.state_dir, ctx.torch_root, files, embed=ctx.embed)
    dropped = drop_llm_summaries(ctx.state_dir, embed=ctx.embed)
    return {"llm_summaries_dropped": dropped} if dropped else {}
