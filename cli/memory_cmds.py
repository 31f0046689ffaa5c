"""`testcurator memory build|query|show`: a thin layer over testcurator.memory.api."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from testcurator.memory.api import Hit, Memory, StoredTest, build
from testcurator.memory.builder import BuildStats

StateDir = Annotated[
    Optional[Path],
    typer.Option("--state-dir", help="Memory directory (default: $TESTCURATOR_STATE_DIR, else ./.testcurator)."),
]
JsonOut = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def _out() -> Console:
    return Console(highlight=False, soft_wrap=True)


def build_cmd(
    torch_root: Annotated[Path, typer.Option("--torch-root", help="PyTorch checkout (or any tree of test files).")],
    files: Annotated[Optional[list[str]], typer.Option(
        "--files", help="Glob or path relative to the root (repeatable; default test/**/test_*.py).")] = None,
    state_dir: StateDir = None,
    no_embed: Annotated[bool, typer.Option("--no-embed", help="Skip embeddings (index and summaries only).")] = False,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Discard the index and build from scratch.")] = False,
    jobs: Annotated[Optional[int], typer.Option(
        "--jobs", "-j", help="Parser processes (default: up to 4 when many files changed).")] = None,
    collect: Annotated[bool, typer.Option(
        "--collect", help="Also collect the files with pytest (no execution): exact instances and the static @ops map.")] = False,
    as_json: JsonOut = False,
) -> None:
    """Index test files (tree-sitter), summarise each test and embed it; incremental."""
    err = Console(stderr=True, highlight=False)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True, disable=as_json or not err.is_terminal) as bar:
        tasks: dict[str, Any] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task("indexing files" if phase == "index" else "embedding tests", total=total)
            bar.update(tasks[phase], completed=done, total=total)

        stats = build(torch_root, files, state_dir, progress=progress, embed=not no_embed, rebuild=rebuild,
                      jobs=jobs)
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
    from testcurator.memory.static import collect_static

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
    text: Annotated[str, typer.Argument(help="What the tests should be about.")],
    k: Annotated[int, typer.Option("-k", help="How many results.")] = 10,
    state_dir: StateDir = None,
    as_json: JsonOut = False,
) -> None:
    """Find tests by meaning (embedding search over their summaries)."""
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
    name: Annotated[str, typer.Argument(help="Class::test (or path::Class::test).")],
    state_dir: StateDir = None,
    as_json: JsonOut = False,
) -> None:
    """Print everything memory knows about one test."""
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
    memory_app = typer.Typer(name="memory", help="Build and query the repository memory.", no_args_is_help=True)
    memory_app.command("build")(build_cmd)
    memory_app.command("query")(query_cmd)
    memory_app.command("show")(show_cmd)
    app.add_typer(memory_app, name="memory")
