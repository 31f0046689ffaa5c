from __future__ import annotations

import textwrap

import pytest

from testcurator.memory.collect import FileIndex, IndexedTest
from testcurator.memory.index import parse_source


def index(src: str) -> FileIndex:
    return parse_source(textwrap.dedent(src).encode(), "test_x.py")


def by_generic(ix: FileIndex) -> dict[str, IndexedTest]:
    return {t.generic: t for t in ix.tests}


BASE = """
class TestA(TestCase):
    @dtypes(torch.float32)
    def test_one(self, device, dtype):
        x = torch.ones(2)
        self.assertEqual(x.sum(), 2)
"""


@pytest.mark.parametrize(
    ("variant", "same"),
    [
        # moved down the file (line numbers change)
        ("\n\n\n" + BASE, True),
        # class renamed
        (BASE.replace("class TestA", "class TestRenamed"), True),
        # test renamed: same content, so the hash still matches (rename detection)
        (BASE.replace("test_one", "test_uno"), True),
        # re-indented into a nested block at module level
        ("if True:\n" + textwrap.indent(BASE, "    "), True),
        # trailing whitespace
        (BASE.replace("(2)\n", "(2)   \n"), True),
        # body changed
        (BASE.replace("ones(2)", "ones(3)"), False),
        # decorator changed
        (BASE.replace("torch.float32", "torch.float64"), False),
    ],
)
def test_content_hash_ignores_position_and_names(variant: str, same: bool) -> None:
    (orig,) = index(BASE).tests
    (other,) = index(variant).tests
    assert (orig.fn.content_hash == other.fn.content_hash) is same


def test_decorators_keep_arguments() -> None:
    ix = index("""
        class TestOps(TestCase):
            @ops(op_db, allowed_dtypes=(torch.float32,))
            @skipIf(IS_WINDOWS, "no")
            @onlyCUDA
            def test_x(self, device, dtype, op):
                pass
    """)
    decos = ix.tests[0].fn.decorators
    assert [d.name for d in decos] == ["ops", "skipIf", "onlyCUDA"]
    assert decos[0].args == ("op_db",)
    assert decos[0].kwargs == (("allowed_dtypes", "(torch.float32,)"),)
    assert decos[1].args == ("IS_WINDOWS", '"no"')
    assert decos[0].line == 3


def test_inheritance_mixins_and_deleted_classes() -> None:
    ix = index("""
        class Mixin:
            def test_m(self): pass
        class TestBase(TestCase):
            def test_b(self): pass
            def test_over(self): return 1
        class TestChild(TestBase, Mixin):
            def test_over(self): return 2
        class TestGone(TestCase):
            def test_g(self): pass
        del TestGone
    """)
    tests = by_generic(ix)
    assert sorted(tests) == ["TestBase::test_b", "TestBase::test_over", "TestChild::test_b",
                             "TestChild::test_m", "TestChild::test_over"]
    assert tests["TestChild::test_m"].fn.defined_in == "Mixin"
    assert tests["TestChild::test_over"].fn.defined_in == "TestChild"
    assert tests["TestChild::test_b"].fn.content_hash == tests["TestBase::test_b"].fn.content_hash


def test_non_test_classes_and_functions_are_ignored() -> None:
    ix = index("""
        class Helper:
            def test_like(self): pass
        class TestReal(unittest.TestCase):
            def helper(self): pass
            def test_real(self): pass
        class _Private(common_utils.TestCase):
            def test_private(self): pass
        def helper(): pass
        if True:
            def test_guarded(): pass
    """)
    assert sorted(t.generic for t in ix.tests) == ["TestReal::test_real", "_Private::test_private", "test_guarded"]


def test_instantiations_only_for_except_for() -> None:
    ix = index("""
        class TestD(TestCase):
            def test_a(self, device): pass
        class TestE(TestCase):
            def test_b(self, device): pass
        @instantiate_parametrized_tests
        class TestP(TestCase):
            def test_c(self): pass
        instantiate_device_type_tests(TestD, globals(), only_for=("cpu", "cuda"))
        common_device_type.instantiate_device_type_tests(TestE, globals(), except_for="cuda")
    """)
    insts = {i.cls: i for i in ix.instantiations}
    assert insts["TestD"].kind == "device" and insts["TestD"].only_for == ("cpu", "cuda")
    assert insts["TestE"].except_for == ("cuda",) and insts["TestE"].only_for is None
    assert insts["TestP"].kind == "parametrized"
    tests = by_generic(ix)
    assert tests["TestD::test_a"].device_generic and not tests["TestP::test_c"].device_generic
    assert tests["TestP::test_c"].parametrized


@pytest.mark.parametrize(
    ("decorators", "expected"),
    [
        ("", 1),
        ("@dtypes(torch.float32, torch.float64)", 2),
        ("@dtypes(*floating_types())", None),
        ("@dtypes(*product((torch.half, torch.float), (torch.int, torch.long, torch.bool)))", 6),
        ("@dtypes(torch.half, *[torch.float, torch.double])", 3),
        ("@dtypes(torch.float32)\n@dtypesIfCPU(torch.int8, torch.int16, torch.int32)", 3),
        ("@parametrize('x', [1, 2, 3])\n@dtypes(torch.half, torch.float)", 6),
        ("@parametrize('x', range(4))", 4),
        ("@parametrize('x,y', product([1, 2], [3, 4, 5]))", 6),
        ("@parametrize('x', SOME_LIST)", None),
        ("@ops(op_db)", None),
        ("@modules(module_db)", None),
        ("@onlyCPU\n@skipIf(True, 'r')", 1),
    ],
)
def test_instances_estimate(decorators: str, expected: int | None) -> None:
    src = "class TestD(TestCase):\n" + textwrap.indent(decorators + "\ndef test_a(self, device): pass\n", "    ")
    src += "instantiate_device_type_tests(TestD, globals())\n"
    (record,) = parse_source(src.encode(), "t.py").tests
    assert record.instances_estimate == expected


def test_parametrize_without_instantiation_is_one_test() -> None:
    (record,) = index("""
        class TestQ(TestCase):
            @parametrize("x", [1, 2])
            def test_q(self, x): pass
    """).tests
    assert record.instances_estimate == 1 and not record.parametrized


def test_torch_calls_resolve_import_aliases() -> None:
    (record,) = index("""
        import torch as th
        import torch.nn.functional as F
        from torch import nn
        from torch.linalg import svd as my_svd
        from torch.testing._internal.common_utils import make_tensor_helper
        class TestC(TestCase):
            def test_c(self):
                x = th.randn(3)
                y = F.relu(x).sum()
                nn.Linear(3, 3)(x)
                my_svd(x)
                make_tensor_helper()
                self.assertEqual(y.item(), y.item())
                other_lib.thing()
    """).tests
    assert record.fn.calls == ("torch.linalg.svd", "torch.nn.Linear", "torch.nn.functional.relu", "torch.randn")
    assert "item" in record.fn.methods and "sum" in record.fn.methods and "assertEqual" not in record.fn.methods


def test_docstring_and_span() -> None:
    (record,) = index('''
        class TestS(TestCase):
            @slowTest
            def test_s(self):
                """First line.

                Details."""
                pass
    ''').tests
    assert record.fn.docstring == "First line.\n\nDetails."
    assert (record.fn.line_start, record.fn.line_end) == (3, 8)


@pytest.mark.parametrize(
    "source",
    [
        "class TestBad(TestCase):\n    def test_x(self:\n        pass\n",
        "def test_y(:\n",
        "x = (\n",
        # tree-sitter accepts these silently; CPython (and so pytest) does not
        "class TestI(TestCase):\n    def test_i(self):\n        for i in x:\n        y = 1\n",
        "def test_u():\nreturn 1\n",
        "return 5\n",
        "if x:\n\ty = 1\n        z = 2\n",
    ],
)
def test_syntax_error_is_recorded_not_raised(source: str) -> None:
    ix = parse_source(source.encode(), "bad.py")
    assert ix.error is not None and "syntax error at line" in ix.error
    assert ix.tests == ()


@pytest.mark.parametrize(
    ("literal", "expected"),
    [
        ('"""One line."""', "One line."),
        ("'single'", "single"),
        ('"a" "b"', "ab"),
        ('r"raw \\d"', "raw \\d"),
        ('"""two\\nlines"""', "two\nlines"),
        ('f"{x}"', None),
    ],
)
def test_docstring_literals(literal: str, expected: str | None) -> None:
    (record,) = index(f"def test_d():\n    {literal}\n").tests
    assert record.fn.docstring == expected
