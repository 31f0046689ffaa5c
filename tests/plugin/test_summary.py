"""pytest's failure summary in the processes a run starts: the same text, from an index."""

from __future__ import annotations

import pytest

TESTS = """
import pytest

@pytest.fixture
def noisy():
    yield
    print("teardown-of-" + __import__("os").environ.get("PYTEST_CURRENT_TEST", "").split("::")[-1].split(" ")[0])

@pytest.mark.parametrize("n", range(3))
def test_fails(noisy, n):
    assert n < 0

def test_passes(noisy):
    pass
"""
# What the terminal reporter holds at the end: its lookup, the passed setup/teardown reports it
# kept, and how many kept reports still carry keywords.
CONFTEST = """
def pytest_terminal_summary(terminalreporter):
    stats = terminalreporter.stats
    terminalreporter.write_line("lookup=" + type(terminalreporter._get_teardown_reports).__name__)
    terminalreporter.write_line("kept=" + ",".join(sorted(f"{r.when}:{r.nodeid.split('::')[-1]}" for r in stats.get("", []))))
    with_keywords = sum(1 for reports in stats.values() for r in reports if getattr(r, "keywords", None))
    terminalreporter.write_line(f"with-keywords={with_keywords}")
"""


@pytest.mark.parametrize(("events", "workers"), [(True, 0), (True, 2), (False, 0)],
                         ids=["our-run", "our-run-xdist", "plain-pytest"])
@pytest.mark.slow
def test_failure_summary_prints_each_teardown_section_once(pytester: pytest.Pytester, events: bool,
                                                           workers: int) -> None:
    pytester.makepyfile(test_sum=TESTS)
    pytester.makeconftest(CONFTEST)
    args = ["-p", "no:cacheprovider", "--tb=native"] + (["--curate-events", "ev.jsonl"] if events else [])
    args += ["-n", str(workers)] if workers else []
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(failed=3, passed=1)
    out = result.stdout.str()
    for n in range(3):
        # Each failure's own teardown output, under its failure, once.
        assert out.count(f"teardown-of-test_fails[{n}]") == 1
    assert out.count("Captured stdout teardown") == 3
    assert "teardown-of-test_passes" not in out
    assert ("lookup=TeardownIndex" in out) is events  # a plain pytest is left as it was
    # Our runs keep, of the passed setup and teardown reports, the failures' teardowns (whose
    # output printed above), and keywords only on those; a plain pytest keeps all.
    kept = [line for line in result.outlines if line.startswith("kept=")]
    if events:
        assert kept == ["kept=teardown:test_fails[0],teardown:test_fails[1],teardown:test_fails[2]"]
        assert "with-keywords=6" in out  # the failures and their teardowns
    else:
        assert len(kept[0].split(",")) == 8 and "with-keywords=12" in out


@pytest.mark.slow
def test_a_summary_of_passes_keeps_every_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_sum=TESTS)
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", "--curate-events", "ev.jsonl")
    result.assert_outcomes(failed=3, passed=1)
    assert len([line for line in result.outlines if line.startswith("kept=")][0].split(",")) == 8
    assert "teardown-of-test_passes" in result.stdout.str()  # -rA prints the passes' output
