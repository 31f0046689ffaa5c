"""The trend page in a real browser: a bar per run in the total chart and in each file's,
the three counts coloured, every bar's tooltip naming its run, no script error."""

from __future__ import annotations

import json
import re
from pathlib import Path

import needs
from testcurator.memory.history import History, RunIdentity
from testcurator.pipelines.nights.chart import COLOURS, page
from testcurator.runner.results.records import TestRecord

CHECK = """<script>window.onerror=function(m){document.title='ERROR '+m;};
window.addEventListener('load',function(){var r={svgs:[],titles:[]};
document.querySelectorAll('svg').forEach(function(s){var b=s.getBoundingClientRect();
  r.svgs.push({w:b.width,h:b.height,rects:Array.from(s.querySelectorAll('rect')).filter(function(x){
    return x.getAttribute('fill')!=='transparent'&&x.getBoundingClientRect().height>0;}).map(function(x){return x.getAttribute('fill');})});});
document.querySelectorAll('svg g title').forEach(function(t){r.titles.push(t.textContent);});
var p=document.createElement('pre');p.id='check';p.textContent=JSON.stringify(r);document.body.appendChild(p);});</script>"""


def _records(passed: int, failed: int, file: str) -> list[TestRecord]:
    return ([TestRecord(f"{file}::TestA::test_p{i}", "passed", generic=f"TestA::test_p{i}") for i in range(passed)]
            + [TestRecord(f"{file}::TestA::test_f{i}", "failed", generic=f"TestA::test_f{i}") for i in range(failed)]
            + [TestRecord(f"{file}::TestA::test_s", "skipped", generic="TestA::test_s")])


def test_the_chart_draws_every_run_in_chromium(tmp_path: Path) -> None:
    with History(tmp_path / "state") as history:
        for n, (passed, failed) in enumerate([(5, 0), (4, 1), (5, 0), (5, 0), (3, 2)], start=1):
            identity = RunIdentity(f"nightly-{n}", "nightly", f"2026-12-0{n}T01:00:00+00:00", "/out", "dev", "2.13.0",
                                   "tree", f"b{n % 2}", "c", "c", exit_code=int(failed > 0))
            history.record(identity, [], {"verify": _records(passed, failed, "test/test_a.py")
                                          + _records(2, 0, "test/test_b.py")})
        html = page("dev", history.runs("/out"), history.counts("/out"))
    target = tmp_path / "history.html"
    target.write_text(html.replace("</body>", CHECK + "</body>"), encoding="utf-8")
    dom = needs.chromium(tmp_path / "profile", "--dump-dom", target.as_uri()).stdout
    assert "ERROR" not in re.search(r"<title>(.*?)</title>", dom).group(1)
    data = json.loads(re.search(r'<pre id="check">(.*?)</pre>', dom, re.S).group(1).replace("&quot;", '"'))
    total, file_a, file_b = data["svgs"]
    assert total["w"] > 500 and total["h"] > 150 and file_a["w"] > 200
    colours = dict((name, colour) for name, colour in COLOURS)
    # run 5: passing, held back and failing all drawn; 5 runs x (passing + held back) + 2 failing runs
    assert total["rects"].count(colours["failing"]) == 2 and total["rects"].count(colours["passing"]) == 5
    assert file_b["rects"].count(colours["failing"]) == 0
    assert len(data["titles"]) == 15 and all(t.startswith("nightly-") for t in data["titles"])
    assert "nightly-5 (2026-12-05T01:00:00+00:00), torch 2.13.0, backend b1, exit 1: 3 passing, 1 held back, " \
           "2 failing" in data["titles"]
