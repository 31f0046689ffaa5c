"""Importing skip lists, matched against really collected device-generic tests."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from testcurator.cli.main import main
from testcurator.runner.collect import CollectedTest, collect
from testcurator.pipelines.migrate.report import report_markdown
from testcurator.pipelines.migrate.importers import import_disabled_tests, import_skip_list
from testcurator.pipelines.migrate.readers import read_skip_list, upstream_path
from testcurator.config.loader import load_config
from testcurator.errors import BadInputError, ConfigError

UPSTREAM = textwrap.dedent(
    '''
    import torch
    from torch.testing._internal.common_utils import TestCase, parametrize
    from torch.testing._internal.common_device_type import instantiate_device_type_tests, dtypes, ops
    from torch.testing._internal.common_methods_invocations import op_db

    OPS = [o for o in op_db if o.name in ("add", "mul") and not o.variant_test_name]

    class TestFoo(TestCase):
        @dtypes(torch.float32, torch.float64, torch.int64)
        def test_bar(self, device, dtype):
            pass

        @ops(OPS, allowed_dtypes=(torch.float32, torch.float64))
        def test_op(self, device, dtype, op):
            pass

        @parametrize("n", [1, 2])
        @dtypes(torch.float32)
        def test_param(self, device, dtype, n):
            pass

        def test_storage_error(self, device):
            pass

        def test_storage_error_no_attribute(self, device):
            pass

    instantiate_device_type_tests(TestFoo, globals(), only_for="cpu")
    '''
)

SKIP_LIST = '''
PYTORCH_TEST_DIR = "../../../../test"

skip_dict = {
    "test_foo_xpu.py": (
        # Typed storage does not exist on XPU
        "test_storage_error",
        "test_bar_xpu_int64",
        "test_op_mul_xpu_float64",
        "test_param_n_1",
        "never_matches_anything",
    ),
    PYTORCH_TEST_DIR + "/test_gone.py": None,
    "test_other_xpu.py": ("_jiterator_"),
}
'''


@pytest.fixture(scope="module")
def torch_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("torch")
    (root / "test").mkdir()
    (root / "test" / "test_foo.py").write_text(UPSTREAM)
    return root


@pytest.fixture(scope="module")
def collected(torch_root: Path) -> list[CollectedTest]:
    return collect([torch_root / "test" / "test_foo.py"], rootdir=torch_root)


@pytest.fixture
def skip_list(tmp_path: Path) -> Path:
    path = tmp_path / "skip_list_common.py"
    path.write_text(SKIP_LIST)
    return path


@pytest.mark.slow
def test_collection_names_instances_generically(collected: list[CollectedTest]) -> None:
    by = {t.name: t for t in collected}
    assert by["test_op_mul_cpu_float64"].generic == "TestFoo::test_op"
    assert by["test_op_mul_cpu_float64"].op == "mul" and by["test_op_mul_cpu_float64"].dtype == "float64"
    assert by["test_storage_error_no_attribute_cpu"].generic == "TestFoo::test_storage_error_no_attribute"
    assert len(collected) == 3 + 4 + 2 + 2


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("test_torch_xpu.py", "test/test_torch.py"),
        ("nn/test_pooling_xpu.py", "test/nn/test_pooling.py"),
        ("../../../../test/nn/test_embedding.py", "test/nn/test_embedding.py"),
        ("test_schema_check.py", "test/test_schema_check.py"),
    ],
)
def test_upstream_path(key: str, expected: str) -> None:
    assert upstream_path(key) == expected


def test_read_skip_list_as_data(skip_list: Path) -> None:
    files = {f.upstream: f for f in read_skip_list(skip_list).files}
    assert files["test/test_gone.py"].patterns == ()
    assert [p.text for p in files["test/test_other.py"].patterns] == ["_jiterator_"]  # ("x") is one string
    storage = files["test/test_foo.py"].patterns[0]
    assert (storage.text, storage.comment) == ("test_storage_error", "Typed storage does not exist on XPU")


@pytest.mark.parametrize("body", ["skip_dict = dict(a=None)", "x = 1", "skip_dict = {"])
def test_skip_list_that_is_not_a_dict_literal_is_refused(tmp_path: Path, body: str) -> None:
    path = tmp_path / "bad.py"
    path.write_text(body + "\n")
    with pytest.raises((ConfigError, BadInputError)):
        read_skip_list(path)


@pytest.mark.parametrize(
    ("body", "where", "message"),
    [
        ("{open('x').read(): None, 'test_a_xpu.py': ('test_b',)}", 1, "key skipped: expected a string"),
        ("{'test_z.py': (f(), 'x'), 'test_a_xpu.py': ('test_b',)}", 1, "pattern skipped: expected a string"),
        ("{f'{UNKNOWN}/x.py': ('p', 'q'), 'test_a_xpu.py': ('test_b',)}", 1, "UNKNOWN is not a module-level string"),
        ("{f'{D!r}/x.py': None, 'test_a_xpu.py': ('test_b',)}", 1, "conversion or format spec"),
    ],
)
def test_entries_that_are_code_are_reported_and_the_rest_read(tmp_path: Path, body: str, where: int,
                                                               message: str) -> None:
    path = tmp_path / "bad.py"
    path.write_text(f"D = 'x'\nskip_dict = {body}\n")
    read = read_skip_list(path)
    assert [p.text for f in read.files if f.upstream == "test/test_a.py" for p in f.patterns] == ["test_b"]
    (problem,) = read.unreadable
    assert problem.location.line == where + 1 and message in problem.message


def test_fstring_keys_of_module_level_names_are_data(tmp_path: Path) -> None:
    # Today's xpu-ops list spells keys f"{PYTORCH_TEST_DIR}/nn/test_embedding.py".
    path = tmp_path / "skip_list_common.py"
    path.write_text('PYTORCH_TEST_DIR = "../../../../test"\n'
                    'skip_dict = {f"{PYTORCH_TEST_DIR}/nn/test_embedding.py": ("test_x_xpu",)}\n')
    (file,) = read_skip_list(path).files
    assert (file.upstream, file.patterns[0].text) == ("test/nn/test_embedding.py", "test_x_xpu")


def test_comments_apply_to_their_block_and_trailing_comments_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "skip_list_common.py"
    path.write_text(textwrap.dedent('''
        skip_dict = {
            "test_a_xpu.py": (
                "test_first",
                # Need quantization support, NotImplementedError: QuantizedXPU
                # (two lines of one note)
                "test_flatten_xpu",
                "test_ravel_xpu",  # and ravel copies on XPU
                "test_view_xpu",

                "test_after_blank_xpu",
                # oneDNN: Long is not supported
                "test_conv_xpu_int64",
            ),
            "test_b_xpu.py": ("test_sort_xpu",),  # Hard code CUDA
            "test_c_xpu.py": (
                "test_c_xpu",
            ),
        }
    '''))
    notes = {p.text: p.comment for f in read_skip_list(path).files for p in f.patterns}
    quant = "Need quantization support, NotImplementedError: QuantizedXPU (two lines of one note)"
    assert notes == {
        "test_first": None,
        "test_flatten_xpu": quant,
        "test_ravel_xpu": quant + " and ravel copies on XPU",
        "test_view_xpu": quant,
        "test_after_blank_xpu": None,
        "test_conv_xpu_int64": "oneDNN: Long is not supported",
        "test_sort_xpu": "Hard code CUDA",
        "test_c_xpu": None,  # the note of the file above does not leak across keys
    }


def test_import_skip_list_exactness(skip_list: Path, torch_root: Path, collected: list[CollectedTest], tmp_path: Path) -> None:
    out = tmp_path / "configs"
    report = import_skip_list(skip_list, torch_root=torch_root, out_dir=out, as_device="xpu", collected=collected)
    rows = {r.pattern: r for r in report.rows}
    # The substring trap: one pattern silently takes its neighbour, and the report says so.
    trap = rows["test_storage_error"]
    assert trap.kind == "substring"
    assert dict(trap.generic) == {"TestFoo::test_storage_error": "full", "TestFoo::test_storage_error_no_attribute": "full"}
    assert rows["test_bar_xpu_int64"].kind == "exact" and dict(rows["test_bar_xpu_int64"].generic) == {"TestFoo::test_bar": "1/3"}
    assert rows["never_matches_anything"].kind == "unmatched"
    assert report.missing_files == ["test/test_gone.py", "test/test_other.py"]
    loaded = load_config(out, torch_root=torch_root)
    (file,) = loaded.files
    assert file.unlisted_test_mode == "mandatory_success"
    entry = {n: e for e in file.entries for n in e.names}
    assert entry["TestFoo::test_storage_error_no_attribute"].mode == "skip"
    reason = entry["TestFoo::test_storage_error"].reason
    assert ("their note: Typed storage does not exist on XPU -- on 'test_storage_error' (line 7: substring: all instances"
            " of TestFoo::test_storage_error, all instances of TestFoo::test_storage_error_no_attribute)") in reason
    assert "NEEDS REVIEW: substring pattern 'test_storage_error' was frozen" in reason
    # Partial matches become exact edits...
    bar, op = entry["TestFoo::test_bar"], entry["TestFoo::test_op"]
    assert bar.mode == "mandatory_success" and [d.name for d in bar.edits.dtypes.exclude] == ["int64"]
    assert [(o.name, [d.name for d in o.dtypes]) for o in op.edits.ops.exclude] == [("mul", ["float64"])]
    # ...unless no edit can say it: widened to the whole test, and reported.
    assert entry["TestFoo::test_param"].mode == "skip"
    assert ("test_foo_xpu.py", "TestFoo::test_param", "widened (1/2 instances matched; the whole test gets skip)") in report.decisions
    assert "widened" in report_markdown(report)


def test_import_refuses_to_overwrite_without_force(skip_list: Path, torch_root: Path, collected: list[CollectedTest],
                                                   tmp_path: Path) -> None:
    out = tmp_path / "configs"
    import_skip_list(skip_list, torch_root=torch_root, out_dir=out, as_device="xpu", collected=collected)
    first = (out / "test_foo.yaml").read_bytes()
    with pytest.raises(BadInputError, match="--force"):
        import_skip_list(skip_list, torch_root=torch_root, out_dir=out, as_device="xpu", collected=collected)
    import_skip_list(skip_list, torch_root=torch_root, out_dir=out, as_device="xpu", collected=collected, force=True)
    assert (out / "test_foo.yaml").read_bytes() == first  # determinism: same inputs, same bytes


def test_import_xfail_mode_widens_partials(skip_list: Path, torch_root: Path, collected: list[CollectedTest],
                                           tmp_path: Path) -> None:
    report = import_skip_list(skip_list, torch_root=torch_root, out_dir=tmp_path / "c", mode="xfail", as_device="xpu",
                              collected=collected)
    modes = {n: e.mode for e in load_config(tmp_path / "c", torch_root=torch_root).files[0].entries for n in e.names}
    assert modes["TestFoo::test_bar"] == "xfail"  # an edit can only skip, so the whole test is xfail
    assert any(d[1] == "TestFoo::test_bar" and d[2].startswith("widened") for d in report.decisions)


def test_import_disabled_tests(torch_root: Path, collected: list[CollectedTest], tmp_path: Path) -> None:
    data = {
        "test_bar_cpu_float32 (__main__.TestFooCPU)": ["https://example.invalid/issues/1", []],
        "test_storage_error_cpu (__main__.TestFooCPU)": ["RuntimeError: typed storage", ["linux"]],
        "test_op (__main__.TestFoo)": ["", ["win"]],
        "test_op_add_cpu_float64 (__main__.TestF)": ["prefix", []],
        "test_nothing (__main__.TestFooCPU)": ["", []],
    }
    path = tmp_path / "disabled.json"
    path.write_text(json.dumps(data))
    report = import_disabled_tests(path, torch_root=torch_root, out_dir=tmp_path / "c", test_files=["test/test_foo.py"],
                                   platform="linux", collected=collected)
    rows = {r.pattern: r for r in report.rows}
    assert "test_op (__main__.TestFoo)" not in rows  # disabled on win only
    # Exact names: test_storage_error never takes test_storage_error_no_attribute.
    assert dict(rows["test_storage_error_cpu (__main__.TestFooCPU)"].generic) == {"TestFoo::test_storage_error": "full"}
    assert rows["test_bar_cpu_float32 (__main__.TestFooCPU)"].kind == "exact"
    assert rows["test_op_add_cpu_float64 (__main__.TestF)"].kind == "class-prefix"  # PyTorch's startswith on classes
    assert rows["test_nothing (__main__.TestFooCPU)"].kind == "unmatched"
    entries = {n: e for e in load_config(tmp_path / "c", torch_root=torch_root).files[0].entries for n in e.names}
    assert [d.name for d in entries["TestFoo::test_bar"].edits.dtypes.exclude] == ["float32"]
    assert "TestFoo::test_storage_error_no_attribute" not in entries
    assert [(o.name, [d.name for d in o.dtypes]) for o in entries["TestFoo::test_op"].edits.ops.exclude] == [("add", ["float64"])]


@pytest.mark.slow
def test_cli_import_skiplist_end_to_end(skip_list: Path, torch_root: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    out, rep = tmp_path / "configs", tmp_path / "report.json"
    args = ["import", "skiplist", str(skip_list), "--torch-root", str(torch_root), "--out", str(out), "--as-device", "xpu",
            "--report", str(rep), "--max-unplaced", "1"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "| test/test_foo.py | `test_storage_error` | substring | 2 |" in printed
    assert [m["file"] for m in json.loads(rep.read_text())["missing_files"]] == ["test/test_gone.py", "test/test_other.py"]
    assert main(["validate", str(out), "--torch-root", str(torch_root)]) == 0
    assert main(args) == 2  # exists, no --force


def _pair(first: str, second: str) -> CollectedTest:
    name = f"test_set_cpu_{first}_{second}"
    return CollectedTest(f"t.py::TestXCPU::{name}", "t.py", "TestXCPU", name, "TestX::test_set", "cpu",
                         f"{first}_{second}", None, None, ())


def test_exclusion_edit_names_the_shared_member_of_dtype_pairs() -> None:
    """A skip list naming every complex128 pair instance becomes one dtype exclusion."""
    from testcurator.pipelines.migrate.importers import exclusion_edit

    instances = [_pair(a, b) for a in ("complex64", "complex128") for b in ("float32", "bool")]
    matched = {t.nodeid for t in instances if t.dtype.startswith("complex128")}
    assert exclusion_edit(instances, matched) == {"dtypes": {"exclude": [{"name": "complex128"}]}}
    assert exclusion_edit(instances, {instances[0].nodeid}) is None  # no dtype says "this pair only"
