"""--curate-labels: only files carrying a given label run; the summary names what was left out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

pytest_plugins = ("pytester",)


@pytest.fixture
def tree(pytester: pytest.Pytester, write_labelled_tree: Callable[[Path], Path]) -> pytest.Pytester:
    write_labelled_tree(pytester.path)
    return pytester


def run(tree: pytest.Pytester, *args: str) -> pytest.RunResult:
    return tree.runpytest_inprocess("-p", "no:cacheprovider", "--curate-config", str(tree.path / "curate.yaml"),
                                    "--curate-torch-root", str(tree.path), *args)


@pytest.mark.parametrize(("labels", "passed", "left_out"), [
    ("trunk", 2, {"test_b.py": "2 test(s) (labels: nightly)"}),
    ("nightly", 4, {}),
    ("trunk,nightly", 4, {}),
    ("other", 0, {"test_a.py": "2 test(s) (labels: nightly, trunk)", "test_b.py": "2 test(s) (labels: nightly)"}),
])
def test_labels_select_files(tree: pytest.Pytester, labels: str, passed: int, left_out: dict[str, str]) -> None:
    result = run(tree, "--curate-labels", labels)
    # test_c.py is not listed: it carries no label and is always left out.
    result.assert_outcomes(passed=passed, deselected=6 - passed)
    text = result.stdout.str()
    assert f"testcurator labels {labels}: {passed} test(s) kept, {6 - passed} left out by label" in text
    assert "left out: (files the config does not list): 2 test(s) (labels: no label)" in text
    for name, what in left_out.items():
        assert f"{tree.path / name}: {what}" in text
    assert result.ret == (0 if passed else pytest.ExitCode.NO_TESTS_COLLECTED)


def test_without_labels_everything_runs(tree: pytest.Pytester) -> None:
    run(tree).assert_outcomes(passed=6)


def test_labels_need_a_config(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_ok():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--curate-labels", "trunk")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--curate-labels needs --curate-config" in result.stderr.str()


def test_bad_label_value_fails_at_parse_time(tree: pytest.Pytester) -> None:
    result = run(tree, "--curate-labels", " , ")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "expected one or more labels" in result.stderr.str()
