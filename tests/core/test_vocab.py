"""The vocabulary's test key: one parser and one formatter for ``file::Class::test``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from testcurator.vocab import (
    FAILED_EVIDENCE, FAILING, MODES, OUTCOMES, TestKey, join_name, op_at, op_excluded, op_matches, op_words, split_name,
    split_op_at,
)

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


@pytest.mark.parametrize("op,dtypes,entries,excluded", [
    ("masked.std", ("complex64",), ("masked.std@complex64",), True),
    ("masked.std", ("float32",), ("masked.std@complex64",), False),  # its other dtypes stay
    ("masked.var", ("complex64",), ("masked.std@complex64",), False),  # other ops at that dtype stay
    ("masked.std", ("float32",), ("masked.std",), True),  # the whole op
    ("add", ("complex128", "bfloat16"), ("add@bfloat16",), True),  # a dtype pair's member
    (None, ("complex64",), ("masked.std@complex64",), False),  # not an @ops instance
])
def test_an_op_is_excluded_whole_or_at_its_dtypes(op: str | None, dtypes: tuple[str, ...], entries: tuple[str, ...],
                                                  excluded: bool) -> None:
    assert op_excluded(op, dtypes, entries) is excluded


def test_an_op_at_a_dtype_round_trips_and_reads_as_words() -> None:
    entry = op_at("masked.std", "complex64")
    assert split_op_at(entry) == ("masked.std", "complex64") and split_op_at("masked.std") == ("masked.std", None)
    assert op_words(["masked.std@complex128", "add", entry]) == "add, masked.std in complex128 and complex64"


def _spelled_sets(path: Path) -> list[str]:
    """Literal collections (and ``Literal[...]``) of two or more outcome or mode words."""
    words = set(OUTCOMES) | set(MODES)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        elts = getattr(node, "elts", None)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple):
            elts = node.slice.elts
        if not elts:
            continue
        strings = [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if len(strings) == len(elts) and len(words.intersection(strings)) >= 2:
            found.append(f"{path.parent.name}/{path.name}:{node.lineno} {strings}")
    return found


def test_no_module_spells_outcome_or_mode_sets_itself() -> None:
    """Issue 9: the sets drifted apart in four modules; they live in testcurator.vocab only."""
    import testcurator

    root = Path(testcurator.__file__).resolve().parent.parent
    packages = ("core", "config", "plugin", "runner", "memory", "agents", "pipelines", "cli")
    found = [hit for pkg in packages for path in sorted((root / pkg).rglob("*.py")) if path.name != "vocab.py"
             for hit in _spelled_sets(path)]
    # Variant.status has words of its own (passed | failed | flaky | ...), not outcomes.
    assert [hit for hit in found if not hit.startswith("offline/refine.py:")] == []
