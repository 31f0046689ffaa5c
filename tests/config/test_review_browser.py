"""The review's HTML page in a real browser (Debian's headless Chromium).

What a reviewer sees is checked where it is laid out: a screenshot (its size, and pixels of
the red "mandatory_success lost" banner at the top), and the DOM after layout, read back
through the browser (names whole and not overflowing their cell, lost rows and stale
reasons coloured, every evidence link landing on the config line it names, a legend).
"""

from __future__ import annotations

import html
import json
import re
import struct
import subprocess
import zlib
from pathlib import Path

import needs
import pytest

from testcurator.config.review import review_paths
from testcurator.config.review_render import render


LONG = "TestTensorArithmetic::test_pow_inplace_resizing_exception_with_broadcast_and_type_promotion"
OLD = f"""test_suite_config:
  files:
    - path: ${{TORCH_ROOT}}/test/test_tensor_arithmetic.py
      tests:
        # Mandatory success confirmed on the device (run-0: 12 instances passed).
        - names: [{LONG}]
          mode: mandatory_success
        # Arithmetic is green.
        - names: [TestTensorArithmetic::test_add_scalar]
          mode: mandatory_success
          edits: {{dtypes: {{exclude: [{{name: bool}}]}}}}
"""
NEW = OLD.replace("mode: mandatory_success\n        # Arithmetic", "mode: skip\n        # Arithmetic").replace(
    "exclude: [{name: bool}]", "exclude: [{name: int64}, {name: float16}, {name: complex64}]")
WINDOW = (900, 1400)

CHECK = """<script>(function(){
var r={names:[],lostBg:[],staleBg:[],links:[],chipHeights:[]};
document.querySelectorAll('td.name').forEach(function(td){var c=td.querySelector('code');
  r.names.push({text:c.textContent,overflow:td.scrollWidth>td.clientWidth+1,lines:c.getClientRects().length});});
document.querySelectorAll('tr.lost td.name').forEach(function(td){r.lostBg.push(getComputedStyle(td).backgroundColor);});
document.querySelectorAll('td.stale').forEach(function(td){r.staleBg.push(getComputedStyle(td).backgroundColor);});
document.querySelectorAll('td a[href^="#"]').forEach(function(a){var t=document.getElementById(a.getAttribute('href').slice(1));
  r.links.push({text:a.textContent,target:!!t,hit:t&&t.querySelector('span.hit')?t.querySelector('span.hit').textContent:null});});
document.querySelectorAll('td .chip').forEach(function(c){r.chipHeights.push(c.getBoundingClientRect().height);});
r.pageOverflow=document.documentElement.scrollWidth>document.documentElement.clientWidth;
var lg=document.getElementById('legend');r.legendHeight=lg?lg.getBoundingClientRect().height:0;r.legend=lg?lg.textContent:'';
var p=document.createElement('pre');p.id='layout-check';p.textContent=JSON.stringify(r);document.body.appendChild(p);})();</script>"""


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("review")
    for side, text in (("old", OLD), ("new", NEW)):
        (root / side).mkdir()
        (root / side / "arith.yaml").write_text(text)
    out = root / "review.html"
    out.write_text(render(review_paths(str(root / "old"), str(root / "new")), "html"))
    return out


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return needs.chromium(tmp_path / "profile", *args, window=WINDOW)


def read_png(path: Path, rows: int) -> tuple[int, int, list[bytes]]:
    """(width, height, the first ``rows`` rows as RGBA bytes): enough of a PNG decoder for
    Chromium's 8-bit RGBA screenshots (rows depend only on rows above, so the top suffices)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert (depth, color) in ((8, 6), (8, 2)), (depth, color)
            bpp = 4 if color == 6 else 3
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, out, prev = zlib.decompressobj().decompress(idat, rows * (width * bpp + 1)), width * bpp, [], bytearray(width * bpp)
    for y in range(min(rows, height)):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out.append(bytes(line) if bpp == 4 else bytes(x for i in range(width) for x in (*line[3 * i:3 * i + 3], 255)))
        prev = line
    return width, height, out


def test_screenshot_size_and_the_lost_banner_pixels(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "review.png"
    chromium(tmp_path, f"--screenshot={shot}", page.as_uri())
    width, height, rows = read_png(shot, rows=320)
    assert (width, height) == WINDOW
    pixels = [tuple(row[i:i + 3]) for row in rows for i in range(0, len(row), 4)]

    def near(rgb: tuple[int, int, int]) -> int:
        return sum(1 for p in pixels if all(abs(x - y) <= 3 for x, y in zip(p, rgb)))

    assert near((0xFF, 0xEB, 0xE9)) > 5000  # the banner's light red, near the top
    assert near((0xCF, 0x22, 0x2E)) > 200  # its red left border and the red headline
    assert near((0xFF, 0xFF, 0xFF)) > len(pixels) // 3  # and a page, not an error screen


def test_dom_after_layout(page: Path, tmp_path: Path) -> None:
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", CHECK + "</body>"))
    dom = chromium(tmp_path, "--dump-dom", probe.as_uri()).stdout
    found = re.search(r'<pre id="layout-check">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    r = json.loads(html.unescape(found.group(1)))
    names = {n["text"]: n for n in r["names"]}
    assert set(names) == {LONG, "TestTensorArithmetic::test_add_scalar"}  # whole names, nothing cut
    assert not any(n["overflow"] for n in r["names"])
    assert not r["pageOverflow"]  # nothing runs off the right edge either
    assert names[LONG]["lines"] >= 2  # the long name wraps in its cell instead
    assert r["lostBg"] == ["rgb(255, 235, 233)"]
    assert r["staleBg"] == ["rgb(255, 248, 197)"]
    assert len(set(r["chipHeights"])) == 1 and len(r["chipHeights"]) == 4  # +3 / -1 edits, none broken inside
    assert r["legendHeight"] > 0 and "loses mandatory_success" in r["legend"] and "edit added" in r["legend"]
    assert len(r["links"]) == 4 and all(link["target"] for link in r["links"])
    hits = {link["text"]: link["hit"] for link in r["links"]}
    assert hits["new arith.yaml:6"].endswith(f"- names: [{LONG}]") and hits["old arith.yaml:9"].endswith(
        "- names: [TestTensorArithmetic::test_add_scalar]")
