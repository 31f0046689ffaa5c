"""`testcurator memory build|query|show`: a thin layer over testcurator.memory.api."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from testcurator.cli.commands import command, new_group
from testcurator.cli.options import (Collect, Embed, Files, Format, JobsDeprecated, JsonDeprecated, QueryText, Rebuild,
                                     StateDir, TestName, TopK, TorchRootReq, Workers, take_deprecated)
from testcurator.memory.api import Hit, Memory
from testcurator.memory.builder import BuildStats, build
from testcurator.memory.store import StoredTest

def _out() -> Console:
    return Console(highlight=False, soft_wrap=True)


def build_cmd(
    torch_root: TorchRootReq,
    files: Files = None,
    state_dir: StateDir = None,
    embed: Embed = True,
    rebuild: Rebuild = False,
    workers: Workers = None,
    collect: Collect = False,
    fmt: Format = "text",
    jobs: JobsDeprecated = None,
    as_json: JsonDeprecated = False,
) -> None:
    """Index test files (tree-sitter), summarise each test and embed it; incremental.

    -n/--workers: parser processes (default: up to 4 when many files changed, else 1).
    """
    workers = take_deprecated(workers, jobs, "-j/--jobs", "-n/--workers")
    as_json = take_deprecated(fmt, "json" if as_json else None, "--json", "--format json", default="text") == "json"
    err = Console(stderr=True, highlight=False)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True, disable=as_json or not err.is_terminal) as bar:
        tasks: dict[str, Any] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task("indexing files" if phase == "index" else "embedding tests", total=total)
            bar.update(tasks[phase], completed=done, total=total)

        stats = build(torch_root, files, state_dir, progress=progress, embed=embed, rebuild=rebuild,
                      jobs=workers)
    static = _collect_static(torch_root, files, state_dir) if collect else None
    if as_json:
        typer.echo(json.dumps({**_stats_json(stats), **({"static": static} if static else {})}, indent=2))
        return
    _print_stats(stats)
    if static:
        err.print(f"static op map: {static['records']} instances collected, {static['with_op']} of them @ops tests")


def _collect_static(torch_root: Path, files: Optional[list[str]], state_dir: Optional[Path]) -> dict[str, int]:
    """Collect-only with the capture plugin, then ingest the records into the op map."""
    from testcurator.memory.builder import discover
    from testcurator.memory.opmap import OpMap
    from testcurator.memory.paths import resolve_state_dir
    from testcurator.memory.stage import collect_static

    root = torch_root.resolve()
    state = resolve_state_dir(state_dir)
    state.mkdir(parents=True, exist_ok=True)
    rels = [rel for _, rel in discover(root, files)]
    out = collect_static(root, rels, state / "static.jsonl", state / "static.log")
    stats = OpMap(state).ingest(out)
    with_op = sum(1 for line in out.read_text(encoding="utf-8").splitlines() if '"op": null' not in line and line.strip())
    return {"records": stats.records, "with_op": with_op}


def _stats_json(stats: BuildStats) -> dict[str, Any]:
    data = dataclasses.asdict(dataclasses.replace(stats, embed=None))
    data["embed"] = dataclasses.asdict(stats.embed) if stats.embed is not None else None
    return data


def _print_stats(stats: BuildStats) -> None:
    out = _out()
    out.print(f"{stats.files_total} file(s): {stats.files_parsed} parsed, {stats.files_unchanged} unchanged, "
              f"{stats.files_removed} removed, {stats.files_failed} failed; {stats.tests_total} test(s) "
              f"({stats.tests_parsed} in parsed files) in {stats.seconds_index:.2f}s", markup=False)
    for path, error in stats.failures:
        out.print(f"  skipped {path}: {error}", markup=False)
    if stats.embed is not None:
        e = stats.embed
        out.print(f"embeddings: {e.added} added, {e.removed} removed, {e.kept} kept in {e.seconds:.2f}s", markup=False)


def query_cmd(
    text: QueryText,
    k: TopK = 10,
    state_dir: StateDir = None,
    fmt: Format = "text",
    as_json: JsonDeprecated = False,
) -> None:
    """Find tests by meaning (embedding search over their summaries)."""
    as_json = take_deprecated(fmt, "json" if as_json else None, "--json", "--format json", default="text") == "json"
    with Memory.open(state_dir) as mem:
        hits = mem.query(text, k)
    if as_json:
        typer.echo(json.dumps([_hit_json(h) for h in hits], indent=2))
        return
    out = _out()
    if not hits:
        out.print("no match")
    for hit in hits:
        first = hit.tests[0]
        out.print(f"{hit.distance:.3f}  {first.generic}  ({first.path}:{first.line_start})", markup=False)
        for other in hit.tests[1:]:
            out.print(f"       also {other.generic}  ({other.path})", markup=False)


def _hit_json(hit: Hit) -> dict[str, Any]:
    return {"content_hash": hit.content_hash, "distance": hit.distance,
            "tests": [{"generic": t.generic, "path": t.path, "line": t.line_start, "summary": t.summary}
                      for t in hit.tests]}


def _test_json(t: StoredTest, mem: Memory) -> dict[str, Any]:
    data = dataclasses.asdict(t)
    data["decorators"] = [d.text() for d in t.decorators]
    data["instantiations"] = [i for i in mem.instantiations(t.path) if i["cls"] == t.cls]
    data["class_bases"] = list(mem.class_bases(t.path, t.cls) or ()) if t.cls else None
    ops = mem.ops_for_test(t.generic)
    data["ops"] = None if ops is None else [dataclasses.asdict(o) for o in ops]
    data["collected"] = mem.collected_instances(t.generic, t.path)
    return data


def show_cmd(
    name: TestName,
    state_dir: StateDir = None,
    fmt: Format = "text",
    as_json: JsonDeprecated = False,
) -> None:
    """Print everything memory knows about one test."""
    as_json = take_deprecated(fmt, "json" if as_json else None, "--json", "--format json", default="text") == "json"
    with Memory.open(state_dir) as mem:
        records = [_test_json(t, mem) for t in mem.require_test(name)]
    if as_json:
        typer.echo(json.dumps(records, indent=2))
        return
    out = _out()
    for i, rec in enumerate(records):
        if i:
            out.print()
        _print_test(out, rec)


def _print_test(out: Console, rec: dict[str, Any]) -> None:
    def line(label: str, value: Any) -> None:
        out.print(f"{label + ':':<19} {value}", markup=False)  # a long label still gets a space

    line("test", rec["generic"])
    line("file", f"{rec['path']}:{rec['line_start']}-{rec['line_end']}")
    if rec["cls"]:
        line("class", f"{rec['cls']}({', '.join(rec['class_bases'] or ())})")
        if rec["defined_in"] != rec["cls"]:
            line("inherited from", rec["defined_in"])
    line("content hash", rec["content_hash"])
    for inst in rec["instantiations"]:
        extra = "".join(f" {k}={inst[k]}" for k in ("only_for", "except_for") if inst.get(k))
        line("instantiated", f"{inst['kind']} (line {inst['line']}){extra}")
    est = rec["instances_estimate"]
    line("instances/device", "unknown (not static)" if est is None else f"~{est} (estimate)")
    for device, dtypes in (rec.get("collected") or {}).items():
        line("collected", f"{len(dtypes)} instance(s) on {device} (dtypes: {', '.join(sorted(set(dtypes)))})")
    for deco in rec["decorators"]:
        line("decorator", deco)
    line("torch calls", ", ".join(rec["calls"]) or "-")
    line("methods", ", ".join(rec["methods"]) or "-")
    if rec["docstring"]:
        line("docstring", rec["docstring"])
    line(f"summary ({rec['summary_author']})", rec["summary"])
    if rec["ops"] is None:
        line("aten ops", "no op map (run `testcurator ops ...`)")
    else:
        line("aten ops", ", ".join(f"{o['aten']} x{o['instances']}" for o in rec["ops"]) or "none captured")


def register(app: typer.Typer) -> None:
    """Add the `memory` group to ``app``."""
    memory_app = new_group("memory", "Build and query the repository memory.")
    command(memory_app, "build")(build_cmd)
    command(memory_app, "query")(query_cmd)
    command(memory_app, "show")(show_cmd)
    app.add_typer(memory_app, name="memory")
