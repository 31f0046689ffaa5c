"""--curate-labels: only files carrying a given label run; the summary names what was left out."""

from __future__ import annotations

import pytest

pytest_plugins = ("pytester",)

FILE = '''
import torch
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase


class Test{name}(TestCase):
    def test_one(self, device):
        self.assertEqual(torch.ones(1, device=device).item(), 1)

    def test_two(self, device):
        pass


instantiate_device_type_tests(Test{name}, globals(), only_for="cpu")
'''

CONFIG = """\
test_suite_config:
  labels: [nightly]
  unlisted_file_mode: mandatory_success
  files:
    - path: ${TORCH_ROOT}/test_a.py
      labels: [trunk]
      unlisted_test_mode: mandatory_success
    - path: ${TORCH_ROOT}/test_b.py
      unlisted_test_mode: mandatory_success
"""


@pytest.fixture
def tree(pytester: pytest.Pytester) -> pytest.Pytester:
    for name in ("a", "b", "c"):
        pytester.makepyfile(**{f"test_{name}": FILE.format(name=name.upper())})
    (pytester.path / "curate.yaml").write_text(CONFIG)
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
