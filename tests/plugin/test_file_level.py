"""A file skipped as a whole that does not import: its collection error is the skip (pytester).

PyTorch's own version skew: an upstream file importing a name this torch no longer has.
"""

from __future__ import annotations

import pytest

BROKEN = "from torch.testing._internal.common_device_type import onlyOnNoSuchDevice\n\ndef test_x():\n    pass\n"
CONFIG = """test_suite_config:
  files:
    - path: ${{TORCH_ROOT}}/test_broken.py
      unlisted_test_mode: {unlisted}
      tests: {tests}
"""


def _run(pytester: pytest.Pytester, unlisted: str, tests: str = "[]") -> pytest.RunResult:
    pytester.makepyfile(test_broken=BROKEN)
    (pytester.path / "curate.yaml").write_text(CONFIG.format(unlisted=unlisted, tests=tests))
    return pytester.runpytest("-p", "no:cacheprovider", "--curate-config", str(pytester.path / "curate.yaml"),
                              "--curate-torch-root", str(pytester.path), "-rs", "--continue-on-collection-errors")


def test_a_wholly_skipped_file_that_does_not_import_is_skipped(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "skip")
    result.assert_outcomes(skipped=1, errors=0)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["*every test of ${TORCH_ROOT}/test_broken.py is skipped*does not import: ImportError*"])


@pytest.mark.parametrize(("unlisted", "tests"), [
    ("mandatory_success", "[]"),
    ("skip", "[{names: [test_x], mode: mandatory_success}]"),
])
def test_a_file_with_anything_to_run_still_fails_to_collect(pytester: pytest.Pytester, unlisted: str, tests: str) -> None:
    result = _run(pytester, unlisted, tests)
    result.assert_outcomes(errors=1)
