"""The trend page: passing, held-back and failing instances per run, in total and per file.

One static HTML file (``<out>/history.html``), no server, no script, no network: stacked
bars drawn as inline SVG, one per run of the ``--out`` (oldest left), each with a tooltip
(the run, its date, torch, backend digest, exit code and the three counts), and below them
one small chart per file, then the runs as a table. The counts are those of each run's
curated-suite run (the verification, else the judge, else the draft), which the history
keeps for every run, compacted or not.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence

from testcurator.memory.history import RunIdentity

COLOURS = (("passing", "#2e7d32"), ("held back", "#9e9e9e"), ("failing", "#c62828"))
_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
.legend span { display: inline-block; margin-right: 16px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px; }
.files { display: flex; flex-wrap: wrap; gap: 16px; }
.file { border: 1px solid #ddd; padding: 8px; }
.file h3 { font-size: 13px; margin: 0 0 4px; font-family: monospace; }
table { border-collapse: collapse; margin-top: 8px; } td, th { border: 1px solid #ddd; padding: 2px 8px; }
td.n { text-align: right; }
"""

Counts = tuple[int, int, int]


def _bars(runs: Sequence[RunIdentity], counts: Mapping[int, Counts], width: int, height: int, label: str) -> str:
    """An SVG of one stacked bar per run (the three counts), scaled to the tallest."""
    top = max((sum(counts.get(r.seq, (0, 0, 0))) for r in runs), default=0) or 1
    step = width / max(len(runs), 1)
    bar = max(step * 0.8, 1.0)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 14}" role="img" '
             f'aria-label="{html.escape(label)}">']
    for i, run in enumerate(runs):
        values = counts.get(run.seq, (0, 0, 0))
        tip = html.escape(f"{run.run_id} ({run.date}), torch {run.torch_version}, backend {run.backend_digest}, "
                          f"exit {run.exit_code}: " + ", ".join(f"{n} {name}" for (name, _), n in zip(COLOURS, values)))
        y = float(height)
        parts.append(f"<g><title>{tip}</title>")
        for (_, colour), n in zip(COLOURS, values):
            h = height * n / top
            y -= h
            if n:
                parts.append(f'<rect x="{i * step:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" fill="{colour}"/>')
        parts.append(f'<rect x="{i * step:.1f}" y="0" width="{bar:.1f}" height="{height}" fill="transparent"/></g>')
    parts.append(f'<text x="0" y="{height + 12}" font-size="10">{html.escape(runs[0].date[:10]) if runs else ""}</text>')
    if len(runs) > 1:
        parts.append(f'<text x="{width}" y="{height + 12}" font-size="10" text-anchor="end">'
                     f'{html.escape(runs[-1].date[:10])}</text>')
    return "".join(parts) + "</svg>"


def _total(counts: Iterable[Counts]) -> Counts:
    p = h = x = 0
    for a, b, c in counts:
        p, h, x = p + a, h + b, x + c
    return p, h, x


def page(backend: str, runs: Sequence[RunIdentity], per_run: Mapping[int, Mapping[str, Counts]]) -> str:
    """The whole page."""
    totals = {seq: _total(files.values()) for seq, files in per_run.items()}
    files = sorted({f for per_file in per_run.values() for f in per_file})
    legend = "".join(f'<span><i style="background:{c}"></i>{n}</span>' for n, c in COLOURS)
    out = [f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>testcurator history: "
           f"{html.escape(backend)}</title><style>{_STYLE}</style></head><body>",
           f"<h1>testcurator: {html.escape(backend)}, {len(runs)} run(s)</h1>",
           "<p>Instances of each run's curated suite (the verification run), oldest first; hover a bar for its run.</p>",
           f'<p class="legend">{legend}</p>', "<h2>All files</h2>", _bars(runs, totals, 720, 200, "all files"),
           f"<h2>Per file ({len(files)})</h2>", '<div class="files">']
    for f in files:
        counts = {seq: per.get(f, (0, 0, 0)) for seq, per in per_run.items()}
        out.append(f'<div class="file"><h3>{html.escape(f)}</h3>{_bars(runs, counts, 320, 80, f)}</div>')
    out += ["</div>", "<h2>Runs</h2>", "<table><tr><th>run</th><th>date</th><th>torch</th><th>backend</th>"
            "<th>configs</th><th>exit</th><th>passing</th><th>held back</th><th>failing</th></tr>"]
    for run in reversed(runs):
        p, h, x = totals.get(run.seq, (0, 0, 0))
        out.append("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in (
            run.run_id, run.date, run.torch_version, run.backend_digest, run.config_digest or "-",
            "-" if run.exit_code is None else run.exit_code)) + "".join(f'<td class="n">{n}</td>' for n in (p, h, x))
            + "</tr>")
    return "\n".join(out + ["</table></body></html>", ""])
