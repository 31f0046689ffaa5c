"""What a reason quotes of an error: one line, single-spaced, and the same every night."""

from __future__ import annotations

import pytest
from testcurator.agents.offline.rules import quote


@pytest.mark.parametrize(("error", "quoted"), [
    # OpenReg's copies of views: the data_ptr() values differ in every process.
    ("AssertionError: Expected 140566870687744 but got 140566870605824.",
     "`AssertionError: Expected <address> but got <address>.`"),
    ("RuntimeError: bad pointer 0x7f3a9c0012a0 in   kernel\nsecond line", "`RuntimeError: bad pointer <address> in kernel`"),
    ("Expected 2147483648 but got 7", "`Expected 2147483648 but got 7`"),  # values a test compares stay
    # unittest's summary quoted in a failure (test_testing's subprocess tests): its time differs per run.
    ("AssertionError: b'Ran 1 test in 0.008s\\n\\nOK\\n'", "`AssertionError: b'Ran 1 test in <time>\\n\\nOK\\n'`"),
    ("took 2.5s to run", "`took 2.5s to run`"),  # a time not introduced by 'in' is a value, and stays
])
def test_a_quote_is_one_steady_line(error: str, quoted: str) -> None:
    assert quote(error) == quoted
