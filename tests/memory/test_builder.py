from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from testcurator.errors import BadInputError, MissingPathError
from testcurator.memory.api import Memory
from testcurator.memory.builder import build
from testcurator.memory.builder import discover
from testcurator.names import parse_name

WriteFile = Callable[[Path, str, str], Path]


def _generics(state_dir: Path) -> dict[str, str]:
    with Memory.open(state_dir) as mem:
        return {f"{t.path}::{t.generic}": t.content_hash for t in mem.tests()}


def test_cold_build_indexes_every_test(torch_tree: Path, state_dir: Path) -> None:
    stats = build(torch_tree, state_dir=state_dir, embed=False)
    assert (stats.files_total, stats.files_parsed, stats.files_failed) == (2, 2, 0)
    assert sorted(_generics(state_dir)) == [
        "test/linalg/test_linalg_small.py::TestMatmul::test_det_identity",
        "test/linalg/test_linalg_small.py::TestMatmul::test_matmul_square",
        "test/linalg/test_linalg_small.py::test_module_level_cholesky",
        "test/test_views.py::TestDeviceViews::test_cpu_only",
        "test/test_views.py::TestDeviceViews::test_narrow",
        "test/test_views.py::TestDeviceViews::test_softmax_dim",
        "test/test_views.py::TestViews::test_transpose_is_view",
        "test/test_views.py::TestViews::test_view_shares_storage",
    ]
    assert stats.tests_total == 8 and stats.embed is None


@pytest.mark.slow
def test_counts_match_pytest_collect_only(torch_tree: Path, state_dir: Path) -> None:
    """Generic names and per-device instance estimates agree with real collection (CPU)."""
    build(torch_tree, state_dir=state_dir, embed=False)
    with Memory.open(state_dir) as mem:
        tests = mem.tests()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "test"],
        cwd=torch_tree, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    known = {t.generic for t in tests}
    collected: Counter[str] = Counter()
    for node_id in (line for line in proc.stdout.splitlines() if "::" in line):
        parts = node_id.split("::")
        generic = parse_name(parts[1], parts[2], known_tests=known).generic if len(parts) == 3 else parts[1]
        collected[f"{parts[0]}::{generic}"] += 1
    expected = {f"{t.path}::{t.generic}": t.instances_estimate for t in tests}
    assert dict(collected) == expected


@pytest.mark.parametrize(("kwargs", "cpu", "cuda"), [
    ("", 2, 2),
    (", only_for='cpu'", 2, 0),
    (", only_for=('cuda', 'xpu')", 0, 2),
    (", except_for=['cpu']", 0, 2),
    (", only_for=DEVICES", None, None),
])
def test_instances_on_device(tmp_path: Path, write_file: WriteFile, kwargs: str, cpu: int | None,
                             cuda: int | None) -> None:
    write_file(tmp_path, "test/test_d.py", f"""
        class TestD(TestCase):
            @dtypes(torch.float32, torch.int64)
            def test_d(self, device, dtype): pass
        instantiate_device_type_tests(TestD, globals(){kwargs})
    """)
    build(tmp_path, state_dir=tmp_path / "state", embed=False)
    with Memory.open(tmp_path / "state") as mem:
        (test,) = mem.test("TestD::test_d")
        assert (mem.instances_on(test, "cpu"), mem.instances_on(test, "cuda")) == (cpu, cuda)


def test_per_device_dtype_decorators_count_on_their_device_only(tmp_path: Path, write_file: WriteFile) -> None:
    write_file(tmp_path, "test/test_d.py", """
        class TestD(TestCase):
            @dtypesIfCPU(torch.float16, torch.bfloat16, torch.float32, torch.float64)
            @dtypesIfMPS(torch.cfloat)
            @dtypesIfPRIVATEUSE1(torch.int8)
            @dtypes(torch.float32, torch.float64)
            def test_d(self, device, dtype): pass
        instantiate_device_type_tests(TestD, globals())
    """)
    build(tmp_path, state_dir=tmp_path / "state", embed=False)
    with Memory.open(tmp_path / "state") as mem:
        (test,) = mem.test("TestD::test_d")
        counts = {dev: mem.instances_on(test, dev) for dev in ("cpu", "cuda", "mps", "lazy", "curatedev")}
        assert counts == {"cpu": 4, "cuda": 2, "mps": 1, "lazy": 2, "curatedev": 1}
        assert "for dtypes float16, bfloat16, float32, float64 on cpu" in test.summary


def test_parallel_build_matches_serial(torch_tree: Path, tmp_path: Path) -> None:
    serial = build(torch_tree, state_dir=tmp_path / "serial", embed=False, jobs=1)
    parallel = build(torch_tree, state_dir=tmp_path / "parallel", embed=False, jobs=2)
    assert (parallel.files_parsed, parallel.tests_total) == (serial.files_parsed, serial.tests_total)
    with Memory.open(tmp_path / "serial") as one, Memory.open(tmp_path / "parallel") as two:
        assert one.tests() == two.tests()


def test_warm_rebuild_parses_nothing(torch_tree: Path, state_dir: Path) -> None:
    build(torch_tree, state_dir=state_dir, embed=False)
    before = _generics(state_dir)
    stats = build(torch_tree, state_dir=state_dir, embed=False)
    assert (stats.files_parsed, stats.files_unchanged, stats.tests_total) == (0, 2, 8)
    assert _generics(state_dir) == before


def test_touched_file_is_restamped_not_parsed(torch_tree: Path, state_dir: Path) -> None:
    build(torch_tree, state_dir=state_dir, embed=False)
    path = torch_tree / "test/test_views.py"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 5_000_000_000))
    stats = build(torch_tree, state_dir=state_dir, embed=False)
    assert (stats.files_parsed, stats.files_unchanged) == (0, 2)


def test_changed_file_reparsed_and_unchanged_tests_keep_hash(torch_tree: Path, state_dir: Path) -> None:
    build(torch_tree, state_dir=state_dir, embed=False)
    before = _generics(state_dir)
    path = torch_tree / "test/test_views.py"
    src = path.read_text().replace("t.narrow(0, 1, 2).numel(), 2", "t.narrow(0, 0, 3).numel(), 3")
    path.write_text("# a new header line moves every test down\n" + src)
    stats = build(torch_tree, state_dir=state_dir, embed=False)
    after = _generics(state_dir)
    assert stats.files_parsed == 1
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {"test/test_views.py::TestDeviceViews::test_narrow"}


def test_deleted_and_unmatched_files_are_removed(torch_tree: Path, state_dir: Path) -> None:
    build(torch_tree, state_dir=state_dir, embed=False)
    (torch_tree / "test/linalg/test_linalg_small.py").unlink()
    stats = build(torch_tree, state_dir=state_dir, embed=False)
    assert stats.files_removed == 1 and all(k.startswith("test/test_views.py") for k in _generics(state_dir))
    stats = build(torch_tree, ["test/test_views.py"], state_dir=state_dir, embed=False)
    assert stats.files_total == 1


def test_files_globs_select_files(torch_tree: Path) -> None:
    rels = [rel for _, rel in discover(torch_tree, ["test/linalg/*.py"])]
    assert rels == ["test/linalg/test_linalg_small.py"]
    rels = [rel for _, rel in discover(torch_tree, ["test/linalg"])]  # a directory: its test files
    assert rels == ["test/linalg/test_linalg_small.py"]
    assert [rel for _, rel in discover(torch_tree / "test")] == ["linalg/test_linalg_small.py", "test_views.py"]


def test_broken_files_are_recorded_and_build_continues(torch_tree: Path, state_dir: Path, write_file: WriteFile) -> None:
    write_file(torch_tree, "test/test_broken.py", "class TestX(TestCase):\n    def test_x(self:\n        pass\n")
    (torch_tree / "test/test_latin1.py").write_bytes(b"# caf\xe9\ndef test_a():\n    pass\n")
    stats = build(torch_tree, state_dir=state_dir, embed=False)
    failures = dict(stats.failures)
    assert "syntax error at line 2" in failures["test/test_broken.py"]
    assert "not UTF-8" in failures["test/test_latin1.py"]
    assert stats.tests_total == 8 and stats.files_failed == 2
    # Still reported on a warm rebuild, where nothing is re-parsed.
    assert build(torch_tree, state_dir=state_dir, embed=False).files_failed == 2


@pytest.mark.parametrize(
    ("setup", "files", "error", "needle"),
    [
        (lambda root: None, None, MissingPathError, "torch root does not exist"),
        (lambda root: root.mkdir(), None, BadInputError, "no Python test files"),
        (lambda root: (root / "test").mkdir(parents=True) or (root / "test/test_a.py").write_text("x = 1\n"),
         None, BadInputError, "no tests found in 1 file"),
        (lambda root: root.mkdir() or (root / "notes.txt").write_text("hi"), ["notes.txt"], BadInputError,
         "not a Python file"),
        (lambda root: root.mkdir(), ["test/test_missing.py"], MissingPathError, "test file does not exist"),
    ],
)
def test_bad_input(tmp_path: Path, setup, files, error: type[Exception], needle: str) -> None:
    root = tmp_path / "root"
    setup(root)
    with pytest.raises(error, match=needle) as info:
        build(root, files, state_dir=tmp_path / "state", embed=False)
    assert info.value.exit_code == 2


def test_rebuild_replaces_a_corrupt_database(torch_tree: Path, state_dir: Path) -> None:
    state_dir.mkdir()
    (state_dir / "memory.sqlite").write_bytes(b"garbage" * 50)
    stats = build(torch_tree, state_dir=state_dir, embed=False, rebuild=True)
    assert stats.tests_total == 8


def test_state_dir_from_environment(torch_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESTCURATOR_STATE_DIR", str(tmp_path / "envstate"))
    build(torch_tree, embed=False)
    assert (tmp_path / "envstate" / "memory.sqlite").is_file()


@pytest.mark.slow
def test_end_to_end_with_real_embeddings(torch_tree: Path, state_dir: Path) -> None:
    """The one test that loads the embedding model: build, query by meaning, change one test."""
    stats = build(torch_tree, state_dir=state_dir)
    assert stats.embed is not None and (stats.embed.added, stats.embed.kept) == (8, 0)
    with Memory.open(state_dir) as mem:
        hits = mem.query("determinant of the identity matrix", k=3)
        assert hits[0].tests[0].generic == "TestMatmul::test_det_identity"
        assert [h.distance for h in hits] == sorted(h.distance for h in hits)
        similar = mem.similar("TestMatmul::test_matmul_square", k=3)
        assert len(similar) == 3 and "TestMatmul::test_matmul_square" not in {h.tests[0].generic for h in similar}
    path = torch_tree / "test/test_views.py"
    path.write_text(path.read_text().replace("numel(), 2)", "numel(), 2)  # checked"))
    stats = build(torch_tree, state_dir=state_dir)
    assert (stats.embed.added, stats.embed.removed, stats.embed.kept) == (1, 1, 7)
