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


@pytest.mark.parametrize(("events", "workers"), [(True, 0), (True, 2), (False, 0)],
                         ids=["our-run", "our-run-xdist", "plain-pytest"])
@pytest.mark.slow
def test_failure_summary_prints_each_teardown_section_once(pytester: pytest.Pytester, events: bool,
                                                           workers: int) -> None:
    pytester.makepyfile(test_sum=TESTS)
    pytester.makeconftest("""
def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line("lookup=" + type(terminalreporter._get_teardown_reports).__name__)
""")
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
