"""The gap board of a hand-written run: what holds each instance back, alone and shared, ranking."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testcurator.errors import BadInputError
from testcurator.pipelines.gaps.board import Board, board_json
from testcurator.pipelines.gaps.files import compute
from testcurator.runner.results.records import TestRecord

DOT = "NotImplementedError: Could not run 'aten::dot' with arguments from the 'gapdev' backend."
ADDMV = "NotImplementedError: Could not run 'aten::addmv.out' with arguments from the 'gapdev' backend."
BATCH_NORM = "NotImplementedError: Could not run 'aten::native_batch_norm' with arguments from the 'gapdev' backend."
PREFERENCE = "preference `No sparse.`"


def _run(k: Any) -> Any:
    """One run with a gap of every kind, and holds that are no gap's (see each line)."""
    crash = "Fatal Python error: Segmentation fault"
    return k.Run(
        verify=[
            # matmul's variants of an @ops test: cut by an edit, for aten::dot (and its .out overload) alone.
            k.skipped("test_ops", "op matmul excluded by edits", op="matmul"),
            k.skipped("test_ops", "op matmul excluded by edits", op="matmul", dtype="int64"),
            # a whole test held back: its float32 instance lacks dot and addmv: shared.
            k.rec("test_mv", "xfailed"),
            # the probe's missing native_layer_norm names native_batch_norm: that is the gap.
            k.rec("test_layer_norm", "xfailed"),
            # a dtype the profile does not declare: its own gap, apart from the ops.
            k.skipped("test_add", "dtype float64 is not in supported_dtypes", dtype="float64"),
            k.rec("test_unfold_view", "xfailed", dtype=None),
            k.rec("test_dlpack", "xfailed"),
            k.skipped("test_nonzero", "Skip: it crashed", dtype="int64"),
            k.rec("test_odd", "xfailed"),
            k.rec("test_cpu_too", "xfailed"),
            k.skipped("test_sparse", "Skip: it needs sparse"),
            k.skipped("test_cuda", "Skip: @onlyCUDA restricts it to cuda"),
            k.skipped("test_pu1", "Skip: @skipPRIVATEUSE1 skips it on the backend's device"),
            k.rec("test_self_skip", "skipped", text="Skipped: test requires SciPy"),
            k.rec("test_ops", "passed", op="add"),
            TestRecord("test/test_broken.py", "skipped", failure_text="Skipped: testcurator: every test of "
                       "test/test_broken.py is skipped, and it does not import: ImportError: cannot import name 'x'"),
        ],
        draft=[
            k.rec("test_mv", "failed", cls="unsupported_op", evidence=DOT),
            k.rec("test_layer_norm", "failed", cls="unsupported_op", evidence=BATCH_NORM),
            k.rec("test_unfold_view", "failed", dtype=None, cls="numerical_mismatch", evidence="Expected 0.0 but got 1.0."),
            k.rec("test_dlpack", "failed", cls="unknown", evidence="ValueError: Unknown device type gapdev for Dlpack"),
            k.rec("test_nonzero", "crashed", dtype="int64", cls="crash", evidence=crash),
            k.rec("test_odd", "failed", cls="unknown", evidence="RuntimeError: something odd"),
            k.rec("test_cpu_too", "failed", cls="unknown", evidence="IndexError: out of range"),
        ],
        decisions=[
            k.decision("test_ops", "mandatory_success"), k.decision("test_add", "mandatory_success"),
            k.decision("test_mv", "xfail_strict"),
            k.decision("test_layer_norm", "xfail_strict", f"Xfail strict: every variant failed with `{BATCH_NORM}`"),
            k.decision("test_unfold_view", "xfail_strict"), k.decision("test_dlpack", "xfail_strict"),
            k.decision("test_nonzero", "skip", "Skip: it crashed"), k.decision("test_odd", "xfail_strict"),
            k.decision("test_cpu_too", "xfail_strict", "Xfail strict: ... as on CPU, the reference device (1 of 1 "
                       "instance failed): the failure is not the backend's"),
            k.decision("test_sparse", "skip", "Skip: it needs sparse", [PREFERENCE]),
            k.decision("test_cuda", "skip", "Skip: @onlyCUDA restricts it to cuda", ["decorator: @onlyCUDA"]),
            k.decision("test_pu1", "skip", "Skip: @skipPRIVATEUSE1 skips it on the backend's device 'gapdev'.",
                       ["decorator: @skipPRIVATEUSE1"]),
        ],
        probe={"aten::dot(float32,float32)": ("missing_kernel", DOT), "aten::dot(int64,int64)": ("missing_kernel", DOT),
               "aten::dot.out(float32,float32,float32)": ("missing_kernel", DOT),
               "aten::addmv(float32,float32,float32)": ("missing_kernel", ADDMV),
               "aten::native_layer_norm(float32)": ("missing_kernel", BATCH_NORM),
               "aten::nonzero.out(float32,int64)": ("crash", "the process died (signal SIGSEGV)"),
               "aten::add.Tensor(float32,float32)": ("works", ""),
               # DLPack maps the device in Python: the probe's replay fails as the draft did
               "python::Tensor.__dlpack_device__(float32)": ("error", "ValueError: Unknown device type gapdev for Dlpack"),
               # a raising twin: its gap is its call's op
               "raises:RuntimeError:aten::dot(float32,float32)": ("missing_kernel", DOT)},
        capture=[
            k.captured("test_ops", ["aten::dot(float32,float32)", "aten::dot.out(float32,float32,float32)"], op="matmul"),
            k.captured("test_ops", ["aten::dot(int64,int64)"], op="matmul", dtype="int64"),
            k.captured("test_mv", ["aten::dot(float32,float32)", "aten::addmv(float32,float32,float32)",
                                   "raises:RuntimeError:aten::dot(float32,float32)"]),
            k.captured("test_layer_norm", ["aten::native_layer_norm(float32)", "aten::add.Tensor(float32,float32)"]),
            k.captured("test_unfold_view", ["aten::unfold(float32)", "aten::select.int(float32)",
                                            "aten::copy_(float32,float32)"], dtype=None),
            k.captured("test_nonzero", ["aten::nonzero.out(int64,int64)"], dtype="int64"),
            k.captured("test_dlpack", ["python::Tensor.__dlpack_device__(float32)"]),
        ])


@pytest.fixture()
def board(gapkit: Any, make_run: Callable[[Any], Path]) -> Board:
    return compute(make_run(_run(gapkit)))


def _by_op(board: Board) -> dict[str, dict[str, Any]]:
    return {g.get("reason") or g["name"]: g for g in board_json(board)}


def test_gaps_group_overloads_and_dtypes_under_the_op_the_device_lacks(board: Board) -> None:
    gaps = _by_op(board)
    assert gaps["aten::dot"]["dtypes"] == ["float32", "int64"]  # dot and dot.out, float32 and int64: one gap
    assert gaps["aten::dot"]["status"] == "missing_kernel"
    assert "aten::native_batch_norm" in gaps and "aten::native_layer_norm" not in gaps
    assert gaps["aten::unfold"]["status"] == "view_copy" and gaps["aten::unfold"]["dtypes"] == ["-"]
    assert gaps["DLPack"]["kind"] == "feature"  # the draft's failure and the probe's replay: one row
    assert not [name for name in gaps if "python::" in name or "raises:" in name]
    assert gaps["aten::nonzero"]["status"] == "crash"  # crashed in the draft; the probe saw nonzero.out crash
    assert [g.id.name for g in board.dtypes] == ["float64"]  # a dtype the profile does not declare, apart


def test_alone_and_shared(board: Board) -> None:
    gaps = _by_op(board)
    assert gaps["aten::dot"]["alone"] == ["TestGaps::test_ops"]
    assert gaps["aten::dot"]["shared"] == {"test/test_gaps.py::TestGaps::test_mv": ["aten::addmv"]}
    assert gaps["aten::dot"]["shared_with"] == ["aten::addmv"]
    assert gaps["aten::addmv"]["alone"] == [] and gaps["aten::addmv"]["shared_with"] == ["aten::dot"]
    assert gaps["aten::native_batch_norm"]["alone"] == ["TestGaps::test_layer_norm"]
    assert gaps["aten::dot"]["instances"] == sorted(gaps["aten::dot"]["instances"]) and len(
        gaps["aten::dot"]["instances"]) == 3


def test_ranked_by_tests_freed_alone_then_shared_then_instances(board: Board) -> None:
    ranked = [g.id.name for g in board.gaps]
    assert ranked[0] == "aten::dot"  # 1 alone, 1 shared
    keys = [g.rank_key for g in board.gaps]
    assert keys == sorted(keys)
    assert ranked[-1] == "aten::addmv"  # 0 alone
    assert [g["rank"] for g in board_json(board) if g["rank"]] == list(range(1, len(board.ranked()) + 1))


@pytest.mark.parametrize(("gap", "commands", "misses"), [
    ("aten::dot", ["matmul"], []),  # its alone test lost matmul's variants to an edit: enable-op matmul lifts it
    ("aten::native_batch_norm", ["aten::native_batch_norm"], []),  # held whole, its reason names that op alone
    ("aten::nonzero", [], ["test/test_gaps.py::TestGaps::test_nonzero"]),  # a crash's reason names no op
    ("DLPack", [], ["test/test_gaps.py::TestGaps::test_dlpack"]),  # not an op: enable-op has nothing to enable
])
def test_enable_op_names_the_command_that_admits_each_alone_test(board: Board, gap: str, commands: list[str],
                                                                  misses: list[str]) -> None:
    found = _by_op(board)[gap]
    assert [c.removeprefix("testcurator enable-op ").split(" --config ")[0] for c in found["enable_op"]] == commands
    assert all(c.endswith(" --state-dir " + c.rsplit(" --state-dir ", 1)[1]) for c in found["enable_op"])
    assert found["enable_op_misses"] == misses


@pytest.mark.parametrize(("test", "where", "reason"), [
    ("TestGaps::test_odd", "unattributed", "RuntimeError: something odd"),
    ("TestGaps::test_cpu_too", "unattributed", "fails on CPU too"),
    ("TestGaps::test_sparse", "not_the_device", "preferences"),
    ("TestGaps::test_cuda", "not_the_device", "@onlyCUDA"),  # another device's decorator
    ("TestGaps::test_pu1", "unattributed", "@skipPRIVATEUSE1 skips it on the backend's device"),  # upstream on this one
    ("TestGaps::test_self_skip", "not_the_device", "skipped by the test itself: test requires SciPy"),
    ("", "not_the_device", "the whole file: testcurator: every test of test/test_broken.py is skipped"),
])
def test_what_no_gap_explains_keeps_its_reason(board: Board, test: str, where: str, reason: str) -> None:
    (group,) = [g for g in board_json(board) if test in g["tests"]]
    assert group["status"] == where and reason in group["reason"] and group["op"] is None


def test_every_held_back_instance_appears_once(board: Board) -> None:
    on_board = [i for g in board_json(board) if g["kind"] in ("unattributed", "not_the_device") for i in g["instances"]]
    on_board += [i for g in board.ranked() for i in g.instances]
    assert board.held == 15 and len(set(on_board)) == 15  # every held instance; the passing one on none


def test_a_run_without_the_capture_is_bad_input(gapkit: Any, make_run: Callable[[Any], Path]) -> None:
    with pytest.raises(BadInputError, match="no CPU op capture.*--capture-ops"):
        compute(make_run(gapkit.Run(captured=False)))


def test_a_folder_that_is_no_run_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="not a run folder"):
        compute(tmp_path)


def test_a_view_the_probe_found_a_copy_is_a_view_copy_gap_before_the_draft_says_so(
        gapkit: Any, make_run: Callable[[Any], Path]) -> None:
    # Upstream test_set_real_imag writes through .real (view_as_real, then select): OpenReg's
    # view_as_real is a copy, which the probe saw through the writing twin; the draft's failure
    # text names no op, and the gap is the twin's call's op, not the select it wrote through last.
    twin = "writes:aten::view_as_real(complex64)"
    k = gapkit
    run = k.Run(verify=[k.rec("test_set_real_imag", "xfailed", dtype=None)],
                draft=[k.rec("test_set_real_imag", "failed", dtype=None, cls="numerical_mismatch",
                             evidence="Mismatched elements: 10 / 10")],
                decisions=[k.decision("test_set_real_imag", "xfail_strict")],
                probe={twin: ("wrong_result", "on CPU its result is a view of its input, on gapdev a copy"),
                       "writes:aten::select.int(float32)": ("works", ""),
                       "aten::view_as_real(complex64)": ("works", "")},
                capture=[k.captured("test_set_real_imag", ["aten::view_as_real(complex64)", twin,
                                                           "writes:aten::select.int(float32)"], dtype=None)])
    gaps = _by_op(compute(make_run(run)))
    assert list(gaps) == ["aten::view_as_real"]
    assert gaps["aten::view_as_real"]["status"] == "view_copy" and gaps["aten::view_as_real"]["dtypes"] == ["complex64"]
