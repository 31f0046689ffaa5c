"""The gap board's page in a real browser (Debian's headless Chromium): it loads with no console
error, every gap and cell opens its list, and the cells carry their status colour."""

from __future__ import annotations

import html
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import needs
import pytest

from testcurator.pipelines.gaps.files import compute
from testcurator.pipelines.gaps.html import COLOURS
from testcurator.pipelines.gaps.render import render

DOT = "NotImplementedError: Could not run 'aten::dot' with arguments from the 'gapdev' backend."
# Installed first thing in <head>, so it hears the page's own script fail.
ERRORS = """<script>window.__errors=[];window.addEventListener('error',function(e){window.__errors.push(String(e.message));});
var __ce=console.error;console.error=function(){window.__errors.push([].join.call(arguments,' '));__ce.apply(console,arguments);};
</script>"""
CLICKS = """<script>(function(){var r={opened:[],colours:[]};
document.querySelectorAll('[data-gap]').forEach(function(el){el.click();
  var h=document.querySelector('#detail h2');r.opened.push({gap:el.dataset.gap,dtype:el.dataset.dtype||null,
  head:h?h.textContent:null,items:document.querySelectorAll('#detail li').length});
  if(el.dataset.dtype){r.colours.push(getComputedStyle(el).backgroundColor);}});
r.errors=window.__errors;var p=document.createElement('pre');p.id='check';p.textContent=JSON.stringify(r);
document.body.appendChild(p);})();</script>"""


def _rgb(colour: str) -> str:
    return "rgb({}, {}, {})".format(*(int(colour[i:i + 2], 16) for i in (1, 3, 5)))


@pytest.fixture()
def page(gapkit: Any, make_run: Callable[[Any], Path], tmp_path: Path) -> Path:
    k = gapkit
    run = make_run(k.Run(
        verify=[k.skipped("test_ops", "op matmul excluded by edits", op="matmul"), k.rec("test_crash", "xfailed"),
                k.skipped("test_half", "dtype float16 is not in supported_dtypes", dtype="float16")],
        draft=[k.rec("test_crash", "crashed", cls="crash", evidence="Fatal Python error: Segmentation fault")],
        decisions=[k.decision("test_ops", "mandatory_success"), k.decision("test_crash", "xfail_strict")],
        probe={"aten::dot(float32,float32)": ("missing_kernel", DOT),
               "aten::nonzero.out(float32,int64)": ("crash", "the process died (signal SIGSEGV)")},
        capture=[k.captured("test_ops", ["aten::dot(float32,float32)"], op="matmul"),
                 k.captured("test_crash", ["aten::nonzero.out(float32,int64)"])]))
    out = tmp_path / "gaps.html"
    out.write_text(render(compute(run), "html"), encoding="utf-8")
    return out


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return needs.chromium(tmp_path / "profile", *args, window=(1200, 900))


def test_the_page_runs_clean_and_every_gap_and_cell_opens(page: Path, tmp_path: Path) -> None:
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("<head>", "<head>" + ERRORS, 1).replace("</body>", CLICKS + "</body>"))
    dom = _chromium(tmp_path, "--dump-dom", probe.as_uri()).stdout
    found = re.search(r'<pre id="check">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    result = json.loads(html.unescape(found.group(1)))
    assert result["errors"] == []
    names = {o["head"] for o in result["opened"] if o["dtype"] is None}
    assert names == {"#1 aten::dot", "#2 aten::nonzero", "#3 dtype float16"}  # a tie: by name
    assert all(o["items"] > 0 for o in result["opened"])  # each opens a list of tests
    assert set(result["colours"]) == {_rgb(COLOURS[s]) for s in ("crash", "missing_kernel", "unsupported_dtype")}


def test_the_browser_logs_no_console_error(page: Path, tmp_path: Path) -> None:
    run = _chromium(tmp_path, "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri())
    console = [line for line in run.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == [] and "What to implement next on gapdev" in run.stdout
