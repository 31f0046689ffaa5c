"""Instantiated test names -> device-generic identity."""

from __future__ import annotations

import sys
import textwrap

import pytest

from testcurator.names import TestIdentity, generic_classes, identify, instantiated_hint, is_generic_name, parse_name

FIXTURE = textwrap.dedent(
    """
    import torch
    from torch.testing._internal.common_utils import TestCase, parametrize, instantiate_parametrized_tests
    from torch.testing._internal.common_device_type import instantiate_device_type_tests, dtypes, ops
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.common_modules import module_db, modules

    OPS = [o for o in op_db if o.name in ("add", "nn.functional.relu") and not o.variant_test_name]
    MODS = [m for m in module_db if m.name == "nn.ReLU"]

    class TestMixin:
        def test_inherited(self, device):
            pass

    class TestFoo(TestMixin, TestCase):
        @dtypes(torch.float32, torch.bfloat16)
        def test_bar(self, device, dtype):
            pass

        @ops(OPS, allowed_dtypes=(torch.float16,))
        def test_op(self, device, dtype, op):
            pass

        @parametrize("x", [1, 2])
        @dtypes(torch.int64)
        def test_p(self, device, dtype, x):
            pass

        @modules(MODS, allowed_dtypes=(torch.float32,))
        def test_mod(self, device, dtype, module_info, training):
            pass

    instantiate_device_type_tests(TestFoo, globals(), only_for="cpu")

    class TestPlain(TestCase):
        @parametrize("n", [3])
        def test_q(self, n):
            pass

    instantiate_parametrized_tests(TestPlain)
    """
)


@pytest.fixture(scope="module")
def fixture_module(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("names") / "names_fixture_mod.py"
    path.write_text(FIXTURE)
    sys.path.insert(0, str(path.parent))
    try:
        import names_fixture_mod

        yield names_fixture_mod
    finally:
        sys.path.remove(str(path.parent))
        sys.modules.pop("names_fixture_mod", None)


@pytest.mark.parametrize(
    ("cls", "attr", "expected"),
    [
        ("TestFooCPU", "test_bar_cpu_float32", TestIdentity("TestFoo", "test_bar", "cpu", "float32")),
        ("TestFooCPU", "test_bar_cpu_bfloat16", TestIdentity("TestFoo", "test_bar", "cpu", "bfloat16")),
        ("TestFooCPU", "test_op_nn_functional_relu_cpu_float16",
         TestIdentity("TestFoo", "test_op", "cpu", "float16", op="nn.functional.relu")),
        ("TestFooCPU", "test_op_add_cpu_float16", TestIdentity("TestFoo", "test_op", "cpu", "float16", op="add")),
        ("TestFooCPU", "test_p_x_2_cpu_int64", TestIdentity("TestFoo", "test_p", "cpu", "int64", params=(("x", "2"),))),
        ("TestFooCPU", "test_inherited_cpu", TestIdentity("TestFoo", "test_inherited", "cpu")),
        ("TestPlain", "test_q_n_3", TestIdentity("TestPlain", "test_q", params=(("n", "3"),))),
    ],
)
def test_identify_live_objects(fixture_module, cls: str, attr: str, expected: TestIdentity) -> None:
    assert identify(getattr(fixture_module, cls), attr) == expected


def test_identify_modules_test(fixture_module) -> None:
    cls = fixture_module.TestFooCPU
    attrs = [a for a in dir(cls) if a.startswith("test_mod")]
    assert attrs, "module_db test did not instantiate"
    ident = identify(cls, attrs[0])
    assert (ident.generic, ident.module, ident.dtype) == ("TestFoo::test_mod", "nn.ReLU", "float32")


@pytest.mark.parametrize(
    ("cls", "test", "known", "devices", "expected"),
    [
        ("TestFooCPU", "test_bar_cpu_float32", None, None, ("TestFoo::test_bar", "cpu", "float32", None)),
        ("TestFooCUDA", "test_bar_cuda_float8_e4m3fn", None, None, ("TestFoo::test_bar", "cuda", "float8_e4m3fn", None)),
        ("TestFooCURATEDEV", "test_op_nn_functional_relu_curatedev_float16", {"TestFoo::test_op"}, ("curatedev",),
         ("TestFoo::test_op", "curatedev", "float16", "nn_functional_relu")),
        ("TestFooCPU", "test_storage_error_no_attribute_cpu", {"TestFoo::test_storage_error"}, None,
         ("TestFoo::test_storage_error", "cpu", None, "no_attribute")),
        ("TestFooCPU", "test_storage_error_no_attribute_cpu",
         {"TestFoo::test_storage_error", "TestFoo::test_storage_error_no_attribute"}, None,
         ("TestFoo::test_storage_error_no_attribute", "cpu", None, None)),
        ("TestPlain", "test_x", None, None, ("TestPlain::test_x", None, None, None)),
        ("TestFooCPU", "test_multi_cpu_float32_int64", None, None, ("TestFoo::test_multi", "cpu", "float32_int64", None)),
    ],
)
def test_parse_name_table(cls, test, known, devices, expected) -> None:
    kwargs = {"known_tests": known}
    if devices:
        kwargs["devices"] = devices
    ident = parse_name(cls, test, **kwargs)
    assert (ident.generic, ident.device, ident.dtype, ident.op) == expected


@pytest.mark.parametrize(
    ("name", "generic", "hint"),
    [
        ("TestFoo::test_bar", True, None),
        ("test_function", True, None),
        ("TestFooCPU::test_bar_cpu_float32", True, "TestFoo::test_bar"),
        ("test/test_x.py::TestFoo::test_bar", False, None),
        ("TestFoo::test_bar[1]", False, None),
        ("TestFoo.test_bar", False, None),
    ],
)
def test_generic_name_forms(name: str, generic: bool, hint: str | None) -> None:
    assert is_generic_name(name) is generic
    if generic:
        assert instantiated_hint(name) == hint


@pytest.mark.parametrize(
    ("name", "known", "variants", "hint"),
    [
        # suffixes only: the OpInfo stays glued to the test name
        ("TestCommonCPU::test_out_argument_add_cpu_float32", (), (), "TestCommon::test_out_argument_add"),
        # the upstream file's definitions are exact
        ("TestCommonCPU::test_out_argument_add_cpu_float32", ("TestCommon::test_out_argument",), (), "TestCommon::test_out_argument"),
        ("TestFooCPU::test_bar_x_1_cpu_int64", ("TestFoo::test_bar", "TestFoo::test_b"), (), "TestFoo::test_bar"),
        # OpInfo / ModuleInfo names, longest first; a training-mode tail is not part of the module
        ("TestCommonCPU::test_out_argument_add_cpu_float32", (), ("add", "d"), "TestCommon::test_out_argument"),
        ("TestModuleCPU::test_forward_nn_BatchNorm1d_eval_mode_cpu_float32", (), ("nn_BatchNorm1d", "BatchNorm1d"),
         "TestModule::test_forward"),
        # a test called test_add is not "test" + the OpInfo add
        ("TestFooCPU::test_add_cpu_float32", (), ("add",), "TestFoo::test_add"),
        ("TestFoo::test_bar", ("TestFoo::test_bar",), ("bar",), None),
    ],
)
def test_instantiated_hint_uses_what_is_known(name: str, known: tuple[str, ...], variants: tuple[str, ...], hint: str | None) -> None:
    assert instantiated_hint(name, known_tests=known, variant_names=variants) == hint


@pytest.mark.parametrize(("name", "device_type", "expected"), [
    ("TestFooCPU", "cpu", {"TestFoo"}),  # instantiated by instantiate_device_type_tests
    ("TestFooCURATEDEV", "curatedev", {"TestFoo"}),  # a backend's own device
    ("TestFooCPU", None, {"TestFooCPU", "TestFoo"}),  # a plain class: either reading of its name
    ("TestBar", None, {"TestBar"}),
])
def test_generic_classes(name: str, device_type: str | None, expected: set[str]) -> None:
    cls = type(name, (), {} if device_type is None else {"device_type": device_type})
    assert generic_classes(cls) == expected
