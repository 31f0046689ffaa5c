"""decide(): the one table of precedence between files, entries, edits and capabilities."""

from __future__ import annotations


import pytest

from testcurator.config.apply import OWN_SKIP, decide
from testcurator.config.loader import load_config
from testcurator.names import TestIdentity

CONFIG = """\
test_suite_config:
  unlisted_file_mode: xfail
  global:
    supported_dtypes: [{name: float32}, {name: float16}]
    supported_ops: [{name: add}, {name: nn.functional.relu, dtypes: [{name: float32}]}, {name: sum}]
  files:
    - path: test_a.py
      unlisted_test_mode: mandatory_success
      tests:
        # the reason
        - names: [TestA::test_ops]
          mode: xfail_strict
          edits:
            ops:
              exclude: [{name: sum_masked}, {name: add, dtypes: [{name: bfloat16}]}]
            dtypes:
              include: [{name: bfloat16}]
        - names: [TestA::test_mod]
          mode: mandatory_success
          edits:
            modules:
              exclude: [{name: nn.Linear}]
            dtypes:
              exclude: [{name: float16}]
        - names: [test_function]
          mode: skip
    - path: test_b.py
      global:
        supported_dtypes: [{name: int64}]
"""


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("apply")
    (root / "cfg.yaml").write_text(CONFIG)
    return load_config(root / "cfg.yaml", torch_root=root), root


def ident(test: str, dtype: str | None = None, op: str | None = None, variant: str | None = None,
          module: str | None = None, cls: str = "TestA") -> TestIdentity:
    return TestIdentity(cls, test, "cpu", dtype, op, variant, module)


@pytest.mark.parametrize(
    ("file", "identity", "mode", "origin", "fragment"),
    [
        ("test_a.py", ident("test_ops", "float32", "add"), "xfail_strict", "entry", "the reason"),
        ("test_a.py", ident("test_ops", "float64", "add"), "skip", "capability", "dtype float64 is not in supported_dtypes"),
        # an op excluded at one dtype: its other dtypes, and other ops at that dtype, stay
        ("test_a.py", ident("test_ops", "bfloat16", "add"), "skip", "edit", "op add excluded by edits"),
        ("test_a.py", ident("test_ops", "bfloat16", "sum"), "xfail_strict", "entry", "the reason"),
        ("test_a.py", ident("test_ops", "float16", "nn.functional.relu"), "skip", "capability", "op nn.functional.relu is not supported for dtype float16"),
        ("test_a.py", ident("test_ops", "float32", "sub"), "skip", "capability", "op sub is not in supported_ops"),
        ("test_a.py", ident("test_ops", "float32", "sum", "masked"), "skip", "edit", "op sum_masked excluded by edits"),
        ("test_a.py", ident("test_ops", "float32", "sum"), "xfail_strict", "entry", "the reason"),
        ("test_a.py", ident("test_mod", "float32", module="nn.Linear"), "skip", "edit", "module nn.Linear excluded"),
        ("test_a.py", ident("test_mod", "float16", module="nn.ReLU"), "skip", "edit", "dtype float16 excluded"),
        ("test_a.py", ident("test_mod", "float32", module="nn.ReLU"), "mandatory_success", "entry", "curated as mandatory_success"),
        ("test_a.py", ident("test_mod_other", "float32"), "mandatory_success", "unlisted_test", "unlisted_test_mode"),
        ("test_a.py", TestIdentity("", "test_function"), "skip", "entry", "curated as skip"),
        ("test_b.py", ident("test_x", "int64"), "skip", "unlisted_test", "unlisted_test_mode: skip"),
        ("test_b.py", ident("test_x", "float32"), "skip", "capability", "dtype float32 is not in supported_dtypes"),
        # dtype pairs (@dtypes(*product(...))): every member counts
        ("test_b.py", ident("test_x", "int64_float32"), "skip", "capability", "dtype float32 is not in supported_dtypes"),
        ("test_a.py", ident("test_mod", "float32_float16"), "skip", "edit", "dtype float16 excluded"),
        ("test_z.py", ident("test_x", "float32"), "xfail", "unlisted_file", "file not listed"),
    ],
)
def test_decide_table(loaded, file: str, identity: TestIdentity, mode: str, origin: str, fragment: str) -> None:
    config, root = loaded
    applied = decide(config, config.file_for(root / file), identity)
    assert (applied.mode, applied.origin) == (mode, origin)
    assert fragment in applied.reason
    # Readers of a run's records tell the config's own skips from a test's by their wording.
    assert bool(OWN_SKIP.match(applied.reason)) == (origin in ("edit", "capability"))
