"""Identity on the parametrization patterns upstream test files use (issue 9 item 6).

The fixture is written here in PyTorch's style on the real ``torch.testing._internal``:
dtype pairs (``@dtypes(*product(...))``), a pair combined with ``@parametrize``, a plain
``@parametrize("op", ...)`` (not an OpInfo), ``name_fn`` with several and two-name
parameters, ``subtest`` names, OpInfo ``_refs.*`` / ``nn.functional.*`` / variants with
``allowed_dtypes``, ``@modules`` with training modes, skip/only decorators, per-device
dtype decorators and a module-level pytest function. Every collected instance must map to
exactly one identity with the right members.
"""

from __future__ import annotations

import textwrap

import pytest

from testcurator.names import TestIdentity, identify, split_dtypes

PATTERNS = textwrap.dedent(
    """
    import operator
    import unittest
    from itertools import product

    import pytest
    import torch
    from torch.testing._internal.common_utils import (
        TestCase, instantiate_parametrized_tests, parametrize, subtest)
    from torch.testing._internal.common_device_type import (
        dtypes, dtypesIfCPU, dtypesIfCUDA, dtypesIfMPS, dtypesIfPRIVATEUSE1, instantiate_device_type_tests,
        onlyCPU, onlyCUDA, ops, skipCUDAIf)
    from torch.testing._internal.common_methods_invocations import op_db, python_ref_db
    from torch.testing._internal.common_modules import module_db, modules, TrainEvalMode

    NAMES = ("_refs.abs", "nn.functional.relu", "div")
    OPS = [o for o in op_db + python_ref_db if o.name in NAMES]
    MODS = [m for m in module_db if m.name == "nn.BatchNorm1d"]


    class TestPairs(TestCase):
        @dtypes(*product((torch.complex64, torch.complex128), (torch.float32, torch.bool)))
        def test_pair(self, device, dtypes):
            pass

        @parametrize("reduce", ["sum", "amax"])
        @dtypes(*product((torch.float64,), (torch.int32, torch.int64)))
        def test_pair_param(self, device, dtypes, reduce):
            pass

        @parametrize("op", [operator.and_, operator.or_], name_fn=lambda f: f.__name__)
        def test_plain_op(self, device, op):
            pass

        @parametrize("use_mask, masked", [(True, False), (False, False)])
        @parametrize("n", [1, 3], name_fn=lambda n: f"size{n}")
        @dtypes(torch.float32)
        def test_several(self, device, dtype, use_mask, masked, n):
            pass

        @ops(OPS, allowed_dtypes=(torch.float32,))
        def test_op(self, device, dtype, op):
            pass

        @modules(MODS, allowed_dtypes=(torch.float64,), train_eval_mode=TrainEvalMode.train_and_eval)
        def test_mod(self, device, dtype, module_info, training):
            pass

        @dtypesIfCPU(torch.float16, torch.float32)
        @dtypesIfCUDA(torch.complex64)
        @dtypesIfMPS(torch.cfloat)
        @dtypesIfPRIVATEUSE1(torch.int8)
        @dtypes(torch.float64)
        def test_per_device(self, device, dtype):
            pass

        @skipCUDAIf(True, "cuda only")
        @unittest.skipIf(False, "never")
        @onlyCPU
        def test_only_cpu(self, device):
            pass

        @onlyCUDA
        def test_only_cuda(self, device):
            pass

        def test_no_device(self):
            pass

    instantiate_device_type_tests(TestPairs, globals(), only_for="cpu")


    class TestNames(TestCase):
        @parametrize("x", [subtest("a.b", name="numpy.dtype('bool')"), subtest(3, name="three")])
        def test_sub(self, x):
            pass

        @parametrize("path", ["pass/arith_ops.py"], name_fn=lambda p: p)
        def test_path(self, path):
            pass

    instantiate_parametrized_tests(TestNames)


    @pytest.mark.parametrize("k", [1, 2])
    def test_module_level(k):
        pass
    """
)


@pytest.fixture(scope="module")
def patterns(tmp_path_factory: pytest.TempPathFactory):
    import importlib.util
    import sys

    path = tmp_path_factory.mktemp("patterns") / "identity_patterns_mod.py"
    path.write_text(PATTERNS)
    spec = importlib.util.spec_from_file_location("identity_patterns_mod", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["identity_patterns_mod"] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("identity_patterns_mod", None)


def _I(test: str, dtype: str | None = None, *, cls: str = "TestPairs", device: str | None = "cpu", op: str | None = None,
       variant: str | None = None, module: str | None = None, params: tuple[tuple[str, str], ...] = ()) -> TestIdentity:
    return TestIdentity(cls, test, device, dtype, op, variant, module, params)


@pytest.mark.parametrize(
    ("cls", "attr", "expected", "dtypes"),
    [
        ("TestPairsCPU", "test_pair_cpu_complex64_bool", _I("test_pair", "complex64_bool"), ("complex64", "bool")),
        ("TestPairsCPU", "test_pair_cpu_complex128_float32", _I("test_pair", "complex128_float32"),
         ("complex128", "float32")),
        ("TestPairsCPU", "test_pair_param_reduce_amax_cpu_float64_int32",
         _I("test_pair_param", "float64_int32", params=(("reduce", "'amax'"),)), ("float64", "int32")),
        # a plain parameter called "op" is no OpInfo: no op, two parameters
        ("TestPairsCPU", "test_plain_op_and__cpu",
         _I("test_plain_op", params=(("op", "<built-in function and_>"),)), ()),
        ("TestPairsCPU", "test_several_use_mask_True_masked_False_size3_cpu_float32",
         _I("test_several", "float32", params=(("masked", "False"), ("n", "3"), ("use_mask", "True"))), ("float32",)),
        ("TestPairsCPU", "test_op__refs_abs_cpu_float32", _I("test_op", "float32", op="_refs.abs"), ("float32",)),
        ("TestPairsCPU", "test_op_nn_functional_relu_cpu_float32", _I("test_op", "float32", op="nn.functional.relu"),
         ("float32",)),
        ("TestPairsCPU", "test_op_div_trunc_rounding_cpu_float32",
         _I("test_op", "float32", op="div", variant="trunc_rounding"), ("float32",)),
        ("TestPairsCPU", "test_mod_nn_BatchNorm1d_train_mode_cpu_float64",
         _I("test_mod", "float64", module="nn.BatchNorm1d", params=(("training", "True"),)), ("float64",)),
        ("TestPairsCPU", "test_mod_nn_BatchNorm1d_eval_mode_cpu_float64",
         _I("test_mod", "float64", module="nn.BatchNorm1d", params=(("training", "False"),)), ("float64",)),
        ("TestPairsCPU", "test_per_device_cpu_float16", _I("test_per_device", "float16"), ("float16",)),
        ("TestPairsCPU", "test_only_cpu_cpu", _I("test_only_cpu"), ()),
        ("TestPairsCPU", "test_no_device_cpu", _I("test_no_device"), ()),
        ("TestNames", "test_sub_numpy.dtype('bool')", _I("test_sub", cls="TestNames", device=None, params=(("x", "'a.b'"),)),
         ()),
        ("TestNames", "test_path_pass/arith_ops.py",
         _I("test_path", cls="TestNames", device=None, params=(("path", "'pass/arith_ops.py'"),)), ()),
    ],
)
def test_identity_of_upstream_patterns(patterns, cls: str, attr: str, expected: TestIdentity,
                                       dtypes: tuple[str, ...]) -> None:
    klass = getattr(patterns, cls)
    assert attr in vars(klass), sorted(a for a in vars(klass) if a.startswith("test"))
    ident = identify(klass, attr)
    assert ident == expected
    assert ident.dtypes == dtypes


def test_every_instance_maps_to_exactly_one_identity(patterns) -> None:
    """No two instances share an identity, and the instance name is rebuilt from it."""
    seen: dict[TestIdentity, str] = {}
    for cls in (patterns.TestPairsCPU, patterns.TestNames):
        for attr in (a for a in vars(cls) if a.startswith("test")):
            ident = identify(cls, attr)
            assert ident not in seen, (attr, seen.get(ident))
            seen[ident] = attr
            assert attr.startswith(ident.test)
            if ident.device:
                tail = "".join(f"_{d}" for d in (ident.device, *ident.dtypes))
                assert attr.endswith(tail), (attr, tail)
            if ident.op is not None:
                assert f"_{ident.op_formatted}_" in attr
    # 4 pairs + 4 pair*param + 2 plain op + 4 several + ops + 2 modes + 2 per-device + 2 + 2 names
    assert len(seen) >= 24


@pytest.mark.parametrize(
    ("dtype", "parts"),
    [(None, ()), ("float32", ("float32",)), ("float32_int64", ("float32", "int64")),
     ("float8_e4m3fn", ("float8_e4m3fn",)), ("complex128_float8_e5m2", ("complex128", "float8_e5m2"))],
)
def test_split_dtypes(dtype: str | None, parts: tuple[str, ...]) -> None:
    assert split_dtypes(dtype) == parts


def test_identity_never_renders_the_opinfo(patterns, monkeypatch: pytest.MonkeyPatch) -> None:
    """OpInfo's repr pretty-prints the whole record (seconds per thousand instances)."""
    from torch.testing._internal.opinfo.core import OpInfo

    def boom(self: object) -> str:
        raise AssertionError("identity rendered an OpInfo with str()/repr()")

    monkeypatch.setattr(OpInfo, "__str__", boom)
    monkeypatch.setattr(OpInfo, "__repr__", boom)
    attr = next(a for a in vars(patterns.TestPairsCPU) if a.startswith("test_op_"))
    assert identify(patterns.TestPairsCPU, attr).op is not None
