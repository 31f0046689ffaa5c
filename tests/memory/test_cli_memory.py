from __future__ import annotations

import json
from pathlib import Path

import pytest

from testcurator.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_build_then_show(torch_tree: Path, state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "memory", "build", "--torch-root", str(torch_tree), "--state-dir", str(state_dir), "--no-embed")
    assert rc == 0 and "2 parsed" in out and "8 test(s)" in out
    rc, out, _ = run(capsys, "memory", "show", "TestDeviceViews::test_softmax_dim", "--state-dir", str(state_dir))
    assert rc == 0
    assert "test/test_views.py:" in out and "@parametrize(\"dim\", [0, 1])" in out
    assert "~2 (estimate)" in out and "torch.nn.functional.softmax" in out
    assert "device (line" in out and "only_for=['cpu']" in out


def test_show_json_and_path_qualified_name(torch_tree: Path, state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "memory", "build", "--torch-root", str(torch_tree), "--state-dir", str(state_dir), "--no-embed")[0] == 0
    rc, out, _ = run(capsys, "memory", "show", "test/test_views.py::TestViews::test_view_shares_storage",
                     "--state-dir", str(state_dir), "--format", "json")
    (record,) = json.loads(out)
    assert rc == 0 and record["defined_in"] == "_ViewChecks" and record["class_bases"] == ["_ViewChecks", "TestCase"]
    assert record["ops"] is None and record["summary_author"] == "offline"


def test_build_json_stats(torch_tree: Path, state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "memory", "build", "--torch-root", str(torch_tree), "--state-dir", str(state_dir),
                     "--no-embed", "--format", "json", "--files", "test/linalg/*.py")
    stats = json.loads(out)
    assert rc == 0 and stats["files_total"] == 1 and stats["tests_total"] == 3 and stats["embed"] is None


def test_state_dir_env(torch_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TESTCURATOR_STATE_DIR", str(tmp_path / "env"))
    assert run(capsys, "memory", "build", "--torch-root", str(torch_tree), "--no-embed")[0] == 0
    rc, out, _ = run(capsys, "memory", "show", "test_module_level_cholesky")
    assert rc == 0 and "test/linalg/test_linalg_small.py" in out


def test_default_state_dir_is_cwd(torch_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("TESTCURATOR_STATE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "memory", "build", "--torch-root", str(torch_tree), "--no-embed")[0] == 0
    assert (tmp_path / ".testcurator" / "memory.sqlite").is_file()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["memory", "build", "--torch-root", "{tmp}/missing", "--no-embed"], "torch root does not exist"),
        (["memory", "build", "--torch-root", "{root}", "--files", "nope/*.py", "--no-embed"], "no Python test files"),
        (["memory", "build", "--torch-root", "{root}", "--files", "test/README.md", "--no-embed"], "not a Python file"),
        (["memory", "show", "TestNope::test_nope"], "run `testcurator memory build` first"),
        (["memory", "query", "anything"], "run `testcurator memory build` first"),
    ],
)
def test_bad_input_exits_2(torch_tree: Path, state_dir: Path, tmp_path: Path, argv: list[str], needle: str,
                           capsys: pytest.CaptureFixture[str]) -> None:
    (torch_tree / "test/README.md").write_text("# notes\n")
    argv = [a.format(tmp=tmp_path, root=torch_tree) for a in argv] + ["--state-dir", str(state_dir)]
    rc, _, err = run(capsys, *argv)
    assert rc == 2 and needle in err


def test_unknown_test_suggests_close_names(torch_tree: Path, state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "memory", "build", "--torch-root", str(torch_tree), "--state-dir", str(state_dir), "--no-embed")
    rc, _, err = run(capsys, "memory", "show", "TestViews::test_transpose_is_vew", "--state-dir", str(state_dir))
    assert rc == 2 and "did you mean TestViews::test_transpose_is_view" in err


def test_query_without_embeddings_exits_2(torch_tree: Path, state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "memory", "build", "--torch-root", str(torch_tree), "--state-dir", str(state_dir), "--no-embed")
    rc, _, err = run(capsys, "memory", "query", "matrix", "--state-dir", str(state_dir))
    assert rc == 2 and "without --no-embed" in err


@pytest.mark.parametrize("content", [b"not a database at all" * 40, b"SQLite format 3\x00" + b"\x00" * 200])
def test_corrupt_memory_exits_2(state_dir: Path, content: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    state_dir.mkdir()
    (state_dir / "memory.sqlite").write_bytes(content)
    rc, _, err = run(capsys, "memory", "show", "TestA::test_a", "--state-dir", str(state_dir))
    assert rc == 2 and "memory.sqlite" in err and "--rebuild" in err


def test_build_on_corrupt_memory_needs_rebuild(torch_tree: Path, state_dir: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    state_dir.mkdir()
    (state_dir / "memory.sqlite").write_bytes(b"corrupted" * 100)
    base = ["memory", "build", "--torch-root", str(torch_tree), "--state-dir", str(state_dir), "--no-embed"]
    rc, _, err = run(capsys, *base)
    assert rc == 2 and "delete it or run `testcurator memory build --rebuild`" in err
    rc, out, _ = run(capsys, *base, "--rebuild")
    assert rc == 0 and "8 test(s)" in out


def test_show_includes_captured_ops_when_an_op_map_exists(torch_tree: Path, state_dir: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from testcurator.memory.opmap import OpMap
    from testcurator.plugin.oprecord import OpRecord

    run(capsys, "memory", "build", "--torch-root", str(torch_tree), "--state-dir", str(state_dir), "--no-embed")
    opmap = OpMap(state_dir)
    opmap.ingest_static([OpRecord(nodeid="test/test_views.py::TestDeviceViewsCPU::test_narrow_cpu_float32",
                                  generic="TestDeviceViews::test_narrow", source="static",
                                  aten=("aten::narrow", "aten::zeros"))])
    opmap.close()
    rc, out, _ = run(capsys, "memory", "show", "TestDeviceViews::test_narrow", "--state-dir", str(state_dir))
    assert rc == 0 and "aten::narrow x1" in out and "aten::zeros x1" in out
