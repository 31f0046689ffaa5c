"""`validate --level 1|2|3`: schema; names, ops and dtypes against the tree (static); collection."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from testcurator.cli.main import main
from testcurator.config.levels import level2_problems

UPSTREAM = textwrap.dedent(
    '''
    import torch
    from torch.testing._internal.common_utils import TestCase
    from torch.testing._internal.common_device_type import instantiate_device_type_tests, dtypes, dtypesIfCUDA, ops
    from torch.testing._internal.common_methods_invocations import op_db

    class TestViewBase(TestCase):
        def test_inherited(self, device):
            pass

    class TestOldViewOps(TestViewBase):
        def test_ravel(self, device):
            pass

        @dtypesIfCUDA(torch.half)
        @dtypes(torch.float, torch.complex64)
        def test_view_as_real(self, device, dtype):
            pass

        @ops([o for o in op_db if o.name == "add"])
        def test_op(self, device, dtype, op):
            pass

    # Generated at import: no static reader sees it, collection does.
    setattr(TestOldViewOps, "test_generated", lambda self, device: None)

    instantiate_device_type_tests(TestOldViewOps, globals(), only_for="cpu")
    '''
)

CONFIG = textwrap.dedent(
    """
    test_suite_config:
      files:
        - path: ${TORCH_ROOT}/test/test_view_ops.py
          tests:
            - names: [TestOldViewOps::test_ravel, TestOldViewOps::test_inherited]
              mode: skip
            - names: [TestOldViewOps::test_ravel_nonexistent]
              mode: skip
            - names: [TestOldViewOps::test_generated]
              mode: skip
            - names: [TestGone::test_x]
              mode: skip
            - names: [TestOldViewOps::test_view_as_real]
              mode: mandatory_success
              edits: {dtypes: {exclude: [{name: float16}, {name: int8}]}}
            - names: [TestOldViewOps::test_ravel]
              mode: mandatory_success
              edits: {ops: {exclude: [{name: add}]}}
            - names: [TestOldViewOps::test_op]
              mode: mandatory_success
              edits: {ops: {exclude: [{name: no_such_op}, {name: div}, {name: div_no_rounding_mode}]}}
    """
)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("torch")
    (root / "test").mkdir()
    (root / "test" / "test_view_ops.py").write_text(UPSTREAM)
    config = root / "config.yaml"
    config.write_text(CONFIG)
    return root, config


def _messages(problems: list[object]) -> list[str]:
    return [getattr(p, "message") for p in problems]


def test_level_2_finds_stale_names_and_edits_that_never_apply(tree: tuple[Path, Path]) -> None:
    root, config = tree
    messages = _messages(level2_problems([config], torch_root=root))
    assert sorted(messages) == sorted([
        "test TestOldViewOps::test_ravel is listed twice in this file (first at line 6)",  # level 1 still runs
        "stale entry: TestOldViewOps::test_ravel_nonexistent is not defined in test_view_ops.py (removed or renamed upstream?)",
        "stale entry: TestOldViewOps::test_generated is not defined in test_view_ops.py (removed or renamed upstream?)",
        "stale entry: TestGone::test_x is not defined in test_view_ops.py (no class TestGone in the file)",
        "dtype int8 of the dtypes edit on TestOldViewOps::test_view_as_real never occurs in it "
        "(its dtypes on any device: complex64, float16, float32)",
        "ops edit on TestOldViewOps::test_ravel, which is not an @ops test: it never applies",
        "op 'no_such_op' of the ops edit on TestOldViewOps::test_op is not an OpInfo of the installed torch",
    ])


def test_cli_levels(tree: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    root, config = tree
    assert main(["validate", str(config), "--torch-root", str(root)]) == 2  # the duplicate: level 1
    assert "stale entry" not in capsys.readouterr().err
    assert main(["validate", str(config), "--torch-root", str(root), "--level", "2"]) == 2
    assert "stale entry: TestOldViewOps::test_ravel_nonexistent" in capsys.readouterr().err
    assert main(["validate", str(config), "--level", "4"]) == 2
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.slow
def test_level_3_collects_and_clears_what_only_collection_sees(tree: tuple[Path, Path],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    root, config = tree
    assert main(["validate", str(config), "--torch-root", str(root), "--level", "3"]) == 2
    err = capsys.readouterr().err
    assert "TestOldViewOps::test_generated" not in err.split("note:")[0]  # generated at import: collected
    assert "stale entry: TestOldViewOps::test_ravel_nonexistent" in err
    assert "note: test_view_ops.py: dtype float16 of the edit on TestOldViewOps::test_view_as_real has no instance here" in err


@pytest.mark.slow
def test_level_3_reports_a_file_that_does_not_collect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "test_skew.py").write_text("from torch.testing._internal.common_device_type import onlyOnCPUAndCUDA\n")
    config = tmp_path / "c.yaml"
    config.write_text("test_suite_config:\n  files:\n    - path: ${TORCH_ROOT}/test/test_skew.py\n"
                      "      unlisted_test_mode: mandatory_success\n")
    assert main(["validate", str(config), "--torch-root", str(tmp_path), "--level", "2"]) == 0
    assert main(["validate", str(config), "--torch-root", str(tmp_path), "--level", "3"]) == 2
    assert "test_skew.py does not collect: ImportError: cannot import name 'onlyOnCPUAndCUDA'" in capsys.readouterr().err
    # Skipped as a whole (what the pipeline writes for a file that does not import): valid, with a note.
    config.write_text("test_suite_config:\n  files:\n    - path: ${TORCH_ROOT}/test/test_skew.py\n")
    assert main(["validate", str(config), "--torch-root", str(tmp_path), "--level", "3"]) == 0
    captured = capsys.readouterr()
    assert "test_skew.py does not collect (ImportError: cannot import name 'onlyOnCPUAndCUDA'" in captured.out + captured.err


PAIRS = textwrap.dedent(
    '''
    from itertools import product

    import torch
    from torch.testing._internal.common_utils import TestCase
    from torch.testing._internal.common_device_type import instantiate_device_type_tests, dtypes

    class TestSegment(TestCase):
        @dtypes(*product((torch.float64, torch.float32), (torch.int64,)))
        def test_pair(self, device, dtypes):
            pass

    instantiate_device_type_tests(TestSegment, globals(), only_for="cpu")
    '''
)


@pytest.mark.parametrize(("excluded", "noted"), [("float64", False), ("int64", False), ("int8", True)])
@pytest.mark.slow
def test_level_3_reads_each_member_of_a_dtype_pair(tmp_path: Path, capsys: pytest.CaptureFixture[str], excluded: str,
                                                   noted: bool) -> None:
    """Upstream test_segment_reductions: its pairs' members were noted as absent."""
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "test_segment.py").write_text(PAIRS)
    config = tmp_path / "c.yaml"
    config.write_text("test_suite_config:\n  files:\n    - path: ${TORCH_ROOT}/test/test_segment.py\n      tests:\n"
                      "        - names: [TestSegment::test_pair]\n          mode: mandatory_success\n"
                      f"          edits: {{dtypes: {{exclude: [{{name: {excluded}}}]}}}}\n")
    assert main(["validate", str(config), "--torch-root", str(tmp_path), "--level", "3"]) == 0
    assert (f"dtype {excluded} of the edit on TestSegment::test_pair has no instance here" in capsys.readouterr().err) is noted


@pytest.mark.parametrize(("name", "found"), [
    ("div", True),  # the OpInfo: every variant, as the plugin applies it
    ("div_no_rounding_mode", True),
    ("div_floor_rounding", False),
    ("nn.functional.relu", True),
    ("add", False),
])
def test_level_3_reads_an_ops_edit_as_the_plugin_does(name: str, found: bool) -> None:
    from testcurator.pipelines.validate_tree import _has_op

    assert _has_op({"div_no_rounding_mode", "nn_functional_relu", None}, name) is found


# common_utils' @parametrize gives instances a dtype as @dtypes does; the dtypes edit applies to
# them (upstream test/nn/test_init.py's test_trunc_normal_all_dtypes: parametrize_test("dtype", ...)).
PARAMETRIZED = textwrap.dedent(
    '''
    import torch
    from torch.testing._internal.common_utils import TestCase, parametrize as parametrize_test, parametrize

    class TestInit(TestCase):
        @parametrize_test("dims", [1, 2])
        @parametrize_test("dtype", [torch.float32, torch.float64])
        def test_all_dtypes(self, device, dims, dtype):
            pass

        @parametrize("x,dtype", [(1, torch.float32)])
        def test_pairs(self, device, x, dtype):
            pass

        @parametrize("dtype", DTYPES)
        def test_named_list(self, device, dtype):
            pass
    '''
)


@pytest.mark.parametrize(("test", "dtypes"), [
    ("TestInit::test_all_dtypes", frozenset({"float32", "float64"})),
    ("TestInit::test_pairs", None),  # several names in one parametrize: not read
    ("TestInit::test_named_list", None),  # not a literal list
])
def test_parametrized_dtypes_are_the_tests_dtypes(tmp_path: Path, test: str, dtypes: frozenset[str] | None) -> None:
    from testcurator.config.upstream_names import test_facts

    path = tmp_path / "test_init.py"
    path.write_text(PARAMETRIZED)
    assert test_facts(path)[test].dtypes == dtypes


# Upstream test_ops_gradients, test_ops_fwd_gradients and test_ops_jit decorate their @ops tests
# through a partial of ``ops`` (module-level, or in the class body): level 2 said their op
# exclusions "never apply", on OpenReg's corpus configs (10 problems), where the plugin applied them.
ALIASED = textwrap.dedent(
    '''
    import functools
    from functools import partial
    from torch.testing._internal.common_device_type import ops, OpDTypes
    from torch.testing._internal.common_methods_invocations import op_db

    _gradcheck_ops = partial(ops, dtypes=OpDTypes.supported)

    class TestJit(TestCase):
        _alias_ops = functools.partial(ops, dtypes=OpDTypes.supported)

        @_gradcheck_ops(op_db)
        def test_fn_grad(self, device, dtype, op):
            pass

        @_alias_ops(op for op in op_db if op.aliases)
        def test_jit_alias_remapping(self, device, dtype, op):
            pass

        def test_plain(self, device):
            pass
    '''
)


@pytest.mark.parametrize(("test", "ops"), [
    ("TestJit::test_fn_grad", True), ("TestJit::test_jit_alias_remapping", True), ("TestJit::test_plain", False)])
def test_an_ops_decorator_under_another_name_is_read_as_ops(tmp_path: Path, test: str, ops: bool) -> None:
    from testcurator.config.upstream_names import test_facts

    path = tmp_path / "test_ops_jit.py"
    path.write_text(ALIASED)
    facts = test_facts(path)[test]
    assert facts.ops is ops
    if ops:  # their OpInfos give the dtypes
        assert facts.dtypes is None
