"""The vocabulary's test key: one parser and one formatter for ``file::Class::test``."""

from __future__ import annotations

import pytest

from testcurator.vocab import FAILED_EVIDENCE, FAILING, OUTCOMES, TestKey, join_name, op_matches, split_name

KEYS = [
    # text, file, cls, test, name, parts
    ("test/test_ops.py::TestCommon::test_out", "test/test_ops.py", "TestCommon", "test_out", "TestCommon::test_out",
     ("test/test_ops.py", "TestCommon", "test_out")),
    ("test/test_fn.py::test_plain", "test/test_fn.py", "", "test_plain", "test_plain", ("test/test_fn.py", "test_plain")),
    # A node id: the instantiated name, and parameters that themselves hold "::".
    ("t.py::TestFooCPU::test_bar_cpu_float32[x::y]", "t.py", "TestFooCPU", "test_bar_cpu_float32[x::y]",
     "TestFooCPU::test_bar_cpu_float32[x::y]", ("t.py", "TestFooCPU", "test_bar_cpu_float32[x::y]")),
    # Nested classes keep their path in cls.
    ("t.py::Outer::Inner::test_x", "t.py", "Outer::Inner", "test_x", "Outer::Inner::test_x",
     ("t.py", "Outer", "Inner", "test_x")),
    ("test/test_only_a_file.py", "test/test_only_a_file.py", "", "", "", ("test/test_only_a_file.py",)),
]


@pytest.mark.parametrize("text,file,cls,test,name,parts", KEYS, ids=[k[0] for k in KEYS])
def test_parse_and_format_round_trip(text: str, file: str, cls: str, test: str, name: str,
                                     parts: tuple[str, ...]) -> None:
    key = TestKey.parse(text)
    assert (key.file, key.cls, key.test, key.name, key.parts) == (file, cls, test, name, parts)
    assert str(key) == text
    if test:
        assert TestKey.of(file, name) == key
        assert split_name(name) == (cls, test) and join_name(cls, test) == name


def test_keys_sort_by_file_then_class_then_test() -> None:
    keys = [TestKey.parse(t) for t in ("b.py::A::t", "a.py::B::t", "a.py::A::u", "a.py::A::t")]
    assert [str(k) for k in sorted(keys)] == ["a.py::A::t", "a.py::A::u", "a.py::B::t", "b.py::A::t"]


def test_outcome_sets_are_made_of_outcomes() -> None:
    assert FAILING < FAILED_EVIDENCE <= set(OUTCOMES)
    assert "crashed" in FAILING and "xfailed" in FAILED_EVIDENCE - FAILING


@pytest.mark.parametrize("op,entry,covered", [
    ("aten::add.Tensor", "aten::add", True), ("aten::add.Tensor", "add", True), ("aten::addmm", "add", False),
    ("nn.functional.relu", "nn.functional", False), ("add", "add", True),
])
def test_op_matches(op: str, entry: str, covered: bool) -> None:
    assert op_matches(op, entry) is covered
