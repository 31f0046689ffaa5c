"""config.review and its renderers on small real configs."""

from __future__ import annotations

import json
import textwrap
from html.parser import HTMLParser
from pathlib import Path

import pytest

from testcurator.config.review import review_paths, shrink_exceeds
from testcurator.config.review_render import FORMATS, render
from testcurator.errors import BadInputError

HEAD = """test_suite_config:
  global:
    supported_dtypes: [{name: float32}%s]
  files:
    - path: ${TORCH_ROOT}/test/test_a.py
      unlisted_test_mode: %s
      tests:
"""


def write(path: Path, entries: str, *, unlisted: str = "skip", extra_dtype: str = "") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    text = HEAD % (extra_dtype, unlisted) + textwrap.indent(textwrap.dedent(entries), " " * 8)
    (path / "test_a.yaml").write_text(text)
    return path


BASE = """\
# Arithmetic is green.
- names: [TestA::test_keep, TestA::test_demote]
  mode: mandatory_success
# Storage is typed on this backend.
- names: [TestA::test_gone]
  mode: skip
"""


@pytest.mark.parametrize(
    ("new_entries", "expected"),
    [
        # mode change only
        (BASE.replace("[TestA::test_keep, TestA::test_demote]", "[TestA::test_keep]")
         + "# Fails since the upgrade.\n- names: [TestA::test_demote]\n  mode: xfail\n",
         {"TestA::test_demote": ("changed", ("mode", "reason"), "mandatory_success -> xfail")}),
        # an entry dropped: the test falls back to unlisted_test_mode
        (BASE.replace("# Storage is typed on this backend.\n- names: [TestA::test_gone]\n  mode: skip\n", ""),
         {"TestA::test_gone": ("removed", (), None)}),
        # a new test listed
        (BASE + "- names: [TestA::test_new]\n  mode: mandatory_success\n",
         {"TestA::test_new": ("added", (), "skip -> mandatory_success")}),
        # edits and reason change, mode unchanged
        (BASE.replace("# Storage is typed", "# Storage is untyped").replace(
            "[TestA::test_gone]\n  mode: skip", "[TestA::test_gone]\n  mode: skip\n  edits: {dtypes: {exclude: [{name: bool}]}}"),
         {"TestA::test_gone": ("changed", ("edits", "reason"), None)}),
    ],
)
def test_per_test_changes(tmp_path: Path, new_entries: str, expected: dict[str, tuple[str, tuple[str, ...], str | None]]) -> None:
    old = write(tmp_path / "old", BASE)
    new = write(tmp_path / "new", new_entries)
    report = review_paths(str(old), str(new))
    (file,) = report.files
    got = {t.name: t for t in file.tests}
    assert set(got) == set(expected)
    for name, (kind, aspects, transition) in expected.items():
        assert got[name].kind == kind
        assert got[name].aspects == aspects
        if transition:
            assert transition in report.summary.transitions
    assert file.raw_path == "${TORCH_ROOT}/test/test_a.py"


def test_reason_and_evidence_are_reported(tmp_path: Path) -> None:
    old = write(tmp_path / "old", BASE)
    new = write(tmp_path / "new", BASE.replace("mode: mandatory_success", "mode: skip"))
    report = review_paths(str(old), str(new))
    change = next(t for t in report.files[0].tests if t.name == "TestA::test_keep")
    assert change.old_reason == change.new_reason == "Arithmetic is green."
    assert change.old_where == "test_a.yaml:9" and change.new_where == "test_a.yaml:9"
    assert report.summary.mandatory_lost == 2 and report.summary.mandatory_before == 2


def test_global_and_file_level_changes(tmp_path: Path) -> None:
    old = write(tmp_path / "old", BASE)
    new = write(tmp_path / "new", BASE, unlisted="mandatory_success", extra_dtype=", {name: bfloat16}")
    report = review_paths(str(old), str(new))
    assert report.global_changes == ("+ supported_dtypes bfloat16",)
    (file,) = report.files
    assert (file.old_unlisted, file.new_unlisted) == ("skip", "mandatory_success")
    assert file.capabilities == ()  # explained by the global change, not repeated per file
    assert report.notes and "unlisted_test_mode skip -> mandatory_success" in report.notes[0]


def test_added_and_removed_files(tmp_path: Path) -> None:
    old = write(tmp_path / "old", BASE)
    new = write(tmp_path / "new", BASE)
    (new / "test_b.yaml").write_text(
        "test_suite_config:\n  files:\n    - path: ${TORCH_ROOT}/test/test_b.py\n      tests:\n"
        "        - names: [TestB::test_x]\n          mode: xfail\n"
    )
    report = review_paths(str(old), str(new))
    assert [(f.raw_path, f.kind) for f in report.files] == [("${TORCH_ROOT}/test/test_b.py", "added")]
    assert report.summary.new_counts["xfail"] == 1 and report.summary.added == 1


def test_identical_configs_have_no_changes(tmp_path: Path) -> None:
    report = review_paths(str(write(tmp_path / "a", BASE)), str(write(tmp_path / "b", BASE)))
    assert report.empty
    assert "No changes." in render(report, "markdown")


@pytest.mark.parametrize(
    ("threshold", "fails"),
    [("0", True), ("1", False), ("2", False), ("49%", True), ("50%", False), ("100%", False)],
)
def test_mandatory_shrink_threshold(tmp_path: Path, threshold: str, fails: bool) -> None:
    old = write(tmp_path / "old", BASE)
    new = write(tmp_path / "new", BASE.replace("[TestA::test_keep, TestA::test_demote]", "[TestA::test_keep]")
                + "- names: [TestA::test_demote]\n  mode: skip\n")
    report = review_paths(str(old), str(new))
    assert report.summary.mandatory_lost == 1
    assert (shrink_exceeds(report, threshold) is not None) == fails


def test_bad_threshold_is_bad_input(tmp_path: Path) -> None:
    report = review_paths(str(write(tmp_path / "a", BASE)), str(write(tmp_path / "b", BASE)))
    with pytest.raises(BadInputError):
        shrink_exceeds(report, "lots")


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        # links inside the page (evidence -> config lines) are fine; nothing may be fetched
        self.external += [v or "" for k, v in attrs if k in ("src", "href") and not (v or "").startswith("#")]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_html_is_self_contained_and_escaped(tmp_path: Path) -> None:
    evil = BASE.replace("# Arithmetic is green.", "# <script>alert(1)</script> & 'quotes' | pipes")
    report = review_paths(str(write(tmp_path / "old", BASE)), str(write(tmp_path / "new", evil)))
    page = render(report, "html")
    parser = _Collector()
    parser.feed(page)
    assert parser.tags.count("script") == 1  # only our own filter, the reason's tag is text
    assert parser.external == []
    assert "<script>alert(1)</script> & 'quotes' | pipes" in "".join(parser.text)  # decoded by the parser
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &#x27;quotes&#x27;" in page
    assert "TestA::test_keep" in "".join(parser.text)


def test_markdown_escapes_table_cells(tmp_path: Path) -> None:
    new = BASE.replace("# Arithmetic is green.", "# a | b")
    md = render(review_paths(str(write(tmp_path / "old", BASE)), str(write(tmp_path / "new", new))), "markdown")
    assert "a \\| b" in md
    assert "| `TestA::test_keep` | changed: reason |" in md


@pytest.mark.parametrize("fmt", FORMATS)
def test_renderings_are_byte_identical_on_rerun(tmp_path: Path, fmt: str) -> None:
    old = write(tmp_path / "old", BASE)
    new = write(tmp_path / "new", BASE.replace("mode: skip", "mode: xfail") + "- names: [TestA::test_z]\n  mode: skip\n")
    first = render(review_paths(str(old), str(new)), fmt)
    second = render(review_paths(str(old), str(new)), fmt)
    assert first == second and "TestA::test_gone" in first
    if fmt == "json":
        assert json.loads(first)["summary"]["changed"] == 1


STALE_BASE = """\
# Mandatory success confirmed on the device.
- names: [TestA::test_keep]
  mode: mandatory_success
  edits: {dtypes: {exclude: [{name: bool}, {name: int8}]}}
"""


def test_edits_as_added_and_removed_items_stale_reason_and_lost_mandatory(tmp_path: Path) -> None:
    new = STALE_BASE.replace("mode: mandatory_success", "mode: skip").replace("{name: int8}", "{name: int64}")
    report = review_paths(str(write(tmp_path / "old", STALE_BASE)), str(write(tmp_path / "new", new)))
    (t,) = report.files[0].tests
    assert (t.edits_added, t.edits_removed) == (("exclude dtype int64",), ("exclude dtype int8",))
    assert t.stale_reason and t.lost_mandatory
    assert report.summary.lost_tests == ("${TORCH_ROOT}/test/test_a.py::TestA::test_keep",)
    assert report.summary.stale_reasons == 1
    assert t.new_excerpt == ((8, "        # Mandatory success confirmed on the device."),
                             (9, "        - names: [TestA::test_keep]"), (10, "          mode: skip"),
                             (11, "          edits: {dtypes: {exclude: [{name: bool}, {name: int64}]}}"))
    md = render(report, "markdown")
    assert "`+exclude dtype int64`<br>`-exclude dtype int8`" in md
    assert "⚠ unchanged although the mode changed: Mandatory success confirmed on the device." in md
    text = render(report, "terminal", width=60)
    assert "✖  mandatory_success lost (1)" in text and "legend:" in text
    page = render(report, "html")
    assert '<tr class="t changed lost">' in page and '<td class="reason stale">' in page
    assert '<a href="#new-test-a-yaml-9">new test_a.yaml:9</a>' in page and '<figure id="new-test-a-yaml-9">' in page


def test_a_changed_reason_is_not_stale(tmp_path: Path) -> None:
    new = STALE_BASE.replace("mode: mandatory_success", "mode: skip").replace("Mandatory success confirmed", "Crashes")
    (t,) = review_paths(str(write(tmp_path / "old", STALE_BASE)), str(write(tmp_path / "new", new))).files[0].tests
    assert not t.stale_reason and t.lost_mandatory


@pytest.mark.parametrize("width", [40, 80, 160])
def test_terminal_never_cuts_a_name(tmp_path: Path, width: int) -> None:
    long = "TestTensorArithmetic::test_pow_inplace_resizing_exception_with_broadcast_and_type_promotion"
    new = STALE_BASE.replace("TestA::test_keep", long)
    text = render(review_paths(str(write(tmp_path / "old", STALE_BASE)), str(write(tmp_path / "new", new))), "terminal",
                  width=width)
    assert "…" not in text
    # the name wraps inside its column: its pieces, joined, give it back whole
    column = [line[10:].rstrip() for line in text.splitlines() if line.startswith(("      ", " +  test ", " -  test "))]
    assert long in "".join(column).replace(" ", "") or long in text


def _moved_file_review(tmp_path: Path):
    """old: test_a.py with test_keep mandatory, a global int8; new: test_a.py dropped, test_b.py added
    (with per-file dtypes), a reason with `->`, `<`, `&` and `|` in it."""
    old = write(tmp_path / "old", BASE, extra_dtype=", {name: int8}")
    new = tmp_path / "new"
    new.mkdir()
    (new / "test_b.yaml").write_text(
        "test_suite_config:\n  global:\n    supported_dtypes: [{name: float32}]\n  files:\n"
        "    - path: ${TORCH_ROOT}/test/test_b.py\n      global: {supported_dtypes: [{name: float32}, {name: bool}]}\n"
        "      tests:\n        # float32 -> bool casts need <stdint> & a | b\n"
        "        - names: [TestB::test_x]\n          mode: xfail\n          edits: {dtypes: {exclude: [{name: bool}]}}\n")
    return review_paths(str(old), str(new))


def test_markdown_has_one_arrow_no_entities_no_none_and_no_nested_list_items(tmp_path: Path) -> None:
    md = render(_moved_file_review(tmp_path), "markdown")
    assert "→" not in md and "&gt;" not in md and "None" not in md
    assert "- - " not in md and "- + " not in md  # a leading sign read as a nested list item
    assert "- removed supported_dtypes int8" in md
    # a removed file: no "unlisted_test_mode skip -> None"; its tests say where they went
    assert "### `${TORCH_ROOT}/test/test_a.py`: removed\n" in md
    assert "| mandatory_success -> file not in config |" in md
    assert "### `${TORCH_ROOT}/test/test_b.py`: added (unlisted_test_mode skip)" in md
    assert "| `TestB::test_x` | added | file not in config -> xfail | `+exclude dtype bool` |" in md
    # prose: `->` and `&` as written, `<` cannot open a tag, `|` cannot end the cell
    assert "float32 -> bool casts need &lt;stdint> & a \\| b |" in md
    assert "- file not in config -> xfail: 1" in md and "- mandatory_success -> file not in config: 2" in md


def test_terminal_and_html_use_the_same_words(tmp_path: Path) -> None:
    report = _moved_file_review(tmp_path)
    text = render(report, "terminal", width=100)
    page = render(report, "html")
    for out in (text, page):
        assert "→" not in out and "None" not in out
        assert "removed supported_dtypes int8" in out
    assert "mandatory_success -> file not in config" in text and "mandatory_success -&gt; file not in config" in page
    assert "test_a.py: removed\n" in text and "test_b.py: added (unlisted_test_mode skip)" in text


def test_a_missing_reason_says_so(tmp_path: Path) -> None:
    new = BASE.replace("# Arithmetic is green.\n", "")
    report = review_paths(str(write(tmp_path / "old", BASE)), str(write(tmp_path / "new", new)))
    md = render(report, "markdown")
    assert "(no reason given) (was: Arithmetic is green.)" in md and "(none)" not in md


def test_markdown_code_spans_are_verbatim(tmp_path: Path) -> None:
    from testcurator.config.review_render import _code

    assert _code("a->b") == "`a->b`"  # no entity inside a code span: it would show as typed
    assert _code("x|y") == "`x\\|y`"  # GFM: a table cell's pipe is escaped even in code
    assert _code("a`b") == "``a`b``" and _code("`a") == "`` `a ``"


@pytest.mark.parametrize("width", [50, 80])
def test_terminal_wraps_names_at_segments(tmp_path: Path, width: int) -> None:
    """Every line break inside a long name falls after `::` or `_`: no piece of a word is cut."""
    long = "TestTensorArithmetic::test_pow_inplace_resizing_exception_with_broadcast_and_type_promotion"
    new = STALE_BASE.replace("TestA::test_keep", long)
    text = render(review_paths(str(write(tmp_path / "old", STALE_BASE)), str(write(tmp_path / "new", new))), "terminal",
                  width=width)
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if " test " in line and "TestTensorArithmetic" in line)
    assert len(lines[first]) <= width
    column = lines[first].index("TestTensorArithmetic")
    pieces: list[str] = []
    for line in lines[first:first + 10]:
        if len("".join(pieces)) >= len(long):
            break
        pieces.append(line[column:].split("  ")[0].rstrip())  # the name, up to the mode after it
    assert len(pieces) > 1  # it did wrap
    assert "".join(pieces) == long
    assert all(p.endswith(("::", "_")) for p in pieces[:-1]), pieces
