"""unittest subTests under pytest 9: each one is reported apart, and the test's record says
what they did (a failing subTest leaves the call itself passing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testcurator.runner.eventlog import EventFold, EventTail

pytest_plugins = ("pytester",)

# In PyTorch's style: upstream test_transform_bias_rescale_qkv runs each shape in a subTest.
SUBTESTS = '''
import unittest

import pytest


class TestSub(unittest.TestCase):
    def test_fails(self):
        for n in (1, 2):
            with self.subTest(n=n):
                if n == 2:
                    raise NotImplementedError("Could not run 'aten::_transform_bias_rescale_qkv'")

    def test_passes(self):
        with self.subTest(n=1):
            pass

    @pytest.mark.xfail(strict=False)
    def test_xfail(self):
        with self.subTest(n=1):
            raise NotImplementedError("no kernel")

    @pytest.mark.xfail(strict=True)
    def test_xfail_strict(self):
        with self.subTest(n=1):
            raise NotImplementedError("no kernel")

    @pytest.mark.xfail(strict=True)
    def test_xfail_strict_passes(self):
        with self.subTest(n=1):
            pass
'''


@pytest.mark.skipif(int(pytest.__version__.split(".")[0]) < 9, reason="pytest reports subTests apart from 9 on")
def test_a_failing_subtest_fails_the_test_and_an_expected_one_is_xfailed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_sub=SUBTESTS)
    events = pytester.path / "events.jsonl"
    pytester.runpytest_inprocess("-p", "no:cacheprovider", f"--curate-events={events}")
    fold = EventFold()
    for source, event in EventTail(Path(events)).poll():
        fold.feed(source, event)
    records = {nodeid.rsplit("::", 1)[1]: r for nodeid, r in fold.finished_records().items()}
    assert {name: r.outcome for name, r in records.items()} == {
        "test_fails": "failed",  # the call itself passed: the last report alone read it green
        "test_passes": "passed",
        "test_xfail": "xfailed",  # the call counts as an unexpected pass: the subTest did fail
        "test_xfail_strict": "xfailed",
        "test_xfail_strict_passes": "failed",  # nothing failed: a strict unexpected pass
    }
    assert "aten::_transform_bias_rescale_qkv" in (records["test_fails"].evidence or "")
