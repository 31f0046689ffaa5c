"""edits.params: exclusions by @parametrize value, in the plugin and in `validate`."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from testcurator.cli.main import main
from testcurator.config.params import parametrized_args, value_forms

pytest_plugins = ("pytester",)

# Our own device-generic file in PyTorch's style: a subtest-named shape, a string
# reduction, a bool flag and a float, stacked @parametrize decorators.
PARAMETRIZED = textwrap.dedent('''
    import torch
    from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
    from torch.testing._internal.common_utils import TestCase, parametrize, subtest


    class TestPool(TestCase):
        @parametrize("shape", [subtest((2, 3), name="2x3"), subtest((4, 4), name="4x4")])
        @parametrize("reduction", ["mean", "sum"])
        @dtypes(torch.float32)
        def test_reduce(self, device, dtype, shape, reduction):
            x = torch.ones(shape, device=device, dtype=dtype)
            getattr(x, reduction)()

        @parametrize("inplace", [True, False])
        @parametrize("alpha", [0.5, 2.0])
        def test_scale(self, device, inplace, alpha):
            torch.ones(2, device=device).mul(alpha)

        def test_plain(self, device):
            pass


    instantiate_device_type_tests(TestPool, globals(), only_for="cpu")
''')

CONFIG = """\
test_suite_config:
  files:
    - path: ${{TORCH_ROOT}}/test_pool.py
      tests:
        - names: [TestPool::test_reduce]
          mode: mandatory_success
          edits:
            params:
              exclude: [{{name: {shape_name}, values: ["2x3"]}}, {{name: reduction, values: [sum]}}]
        - names: [TestPool::test_scale]
          mode: mandatory_success
          edits:
            params:
              exclude: [{{name: inplace, values: [true]}}, {{name: alpha, values: ["0_5"]}}]
        - names: [TestPool::test_plain]
          mode: mandatory_success
"""


@pytest.mark.parametrize(("text", "form"), [
    ("(2, 3)", "2x3"), ("'mean'", "mean"), ("True", "True"), ("0.5", "0_5"), ("0.5", "0.5"), ("3", "3"),
    ("torch.float32", "torch.float32"),
])
def test_value_forms(text: str, form: str) -> None:
    assert form in value_forms(text)


def test_value_forms_do_not_over_match() -> None:
    assert "2" not in value_forms("(2, 3)") and "mea" not in value_forms("'mean'")


def test_plugin_skips_only_the_excluded_values(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_pool=PARAMETRIZED)
    cfg = pytester.path / "curate.yaml"
    cfg.write_text(CONFIG.format(shape_name="shape"))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--curate-config", str(cfg),
                                          "--curate-torch-root", str(pytester.path), "-rA")
    passed = {m.group(1).rsplit("::", 1)[1] for m in re.finditer(r"^PASSED (\S+)", result.stdout.str(), re.M)}
    assert passed == {"test_reduce_4x4_reduction_mean_cpu_float32", "test_scale_inplace_False_alpha_2_0_cpu",
                      "test_plain_cpu"}
    result.assert_outcomes(passed=3, skipped=6)
    text = result.stdout.str()
    assert "parameter shape=2x3 excluded by edits" in text and "parameter inplace=True excluded by edits" in text


def test_parametrized_args_read_from_the_source(tmp_path: Path) -> None:
    (tmp_path / "test_pool.py").write_text(PARAMETRIZED)
    args = parametrized_args(tmp_path / "test_pool.py")
    assert args["TestPool::test_reduce"] == {"shape", "reduction"}
    assert args["TestPool::test_plain"] == frozenset()


# Upstream test_subclass names a parametrize once at module level and applies it bare;
# a bare decorator this file does not define may come from elsewhere.
ALIASED = """\
from torch.testing._internal.common_utils import TestCase, parametrize
from helpers import parametrize_shapes
from torch.testing._internal.common_device_type import onlyCPU

parametrize_cls = parametrize("tensor_cls", ["a", "b"])


class TestAliased(TestCase):
    @parametrize_cls
    @parametrize("as_param", [False, True])
    def test_deepcopy(self, tensor_cls, as_param):
        pass

    @onlyCPU
    @parametrize_shapes
    def test_imported(self, device, shape):
        pass

    @onlyCPU
    @parametrize("k", [1])
    def test_exact(self, device, k):
        pass
"""


def test_parametrized_args_through_aliases(tmp_path: Path) -> None:
    (tmp_path / "test_aliased.py").write_text(ALIASED)
    args = parametrized_args(tmp_path / "test_aliased.py")
    assert args["TestAliased::test_deepcopy"] == {"tensor_cls", "as_param"}
    assert args["TestAliased::test_imported"] == {"device", "shape"}  # unreadable: the function's arguments
    assert args["TestAliased::test_exact"] == {"k"}  # a plain decorator keeps the check exact


def test_validate_reports_an_unknown_parameter_at_its_position(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "test_pool.py").write_text(PARAMETRIZED)
    cfg = tmp_path / "curate.yaml"
    cfg.write_text(CONFIG.format(shape_name="shapes"))
    assert main(["validate", str(cfg), "--torch-root", str(tmp_path)]) == 2
    err = capsys.readouterr()
    text = err.out + err.err
    assert (f"{cfg}:9:32: unknown parameter 'shapes' for TestPool::test_reduce "
            "(its @parametrize arguments: reduction, shape)") in text
    cfg.write_text(CONFIG.format(shape_name="shape"))
    assert main(["validate", str(cfg), "--torch-root", str(tmp_path)]) == 0


def test_review_shows_parameter_edits() -> None:
    from testcurator.config.review import edit_items, edits_text
    from testcurator.config.schema import Edits

    edits = Edits.model_validate({"params": {"exclude": [{"name": "shape", "values": ["2x3", "4x4"]}]}})
    assert edit_items(edits) == ("exclude param shape=2x3", "exclude param shape=4x4")
    assert edits_text(edits) == "params -shape=2x3 -shape=4x4"
