"""The board of a finished run: computed, written beside its report, summed up in it.

:func:`compute` reads a run folder and builds the board; :func:`write_board` writes it into a
folder (the run's ``--out``) as ``gaps.md``, ``gaps.html`` and ``gaps.json``;
:func:`report_section` writes them and returns the report's "What to implement next" section
(the top 10, linked to the full board).
"""

from __future__ import annotations

from pathlib import Path

from testcurator.errors import BadInputError
from testcurator.files import atomic_write_text
from testcurator.pipelines.gaps import render
from testcurator.pipelines.gaps.attribute import attribute
from testcurator.pipelines.gaps.board import Board, build, headline
from testcurator.pipelines.gaps.sources import load
from testcurator.vocab import HELD_BACK_MODES

BOARD_FILES = {"markdown": "gaps.md", "html": "gaps.html", "json": "gaps.json"}
REPORT_TOP = 10


def compute(run_dir: Path) -> Board:
    """The gap board of the finished run in ``run_dir`` (a run folder, ``run.json`` in it)."""
    src = load(run_dir)
    where = ("the verification of the final configs" if src.verified else "the draft's execution" if src.executed
             else "the decisions (the run executed no test)")
    evidence = (f"held back in {where}; gaps from the draft's failures, the probe's capability table "
                f"({len(src.probe)} calls) and the CPU capture")
    tail = f" --config {src.configs or 'CONFIGS'} --backend {src.profile} --state-dir {src.state_dir}"
    whole = {t: d.reason for t, d in src.decisions.items() if d.mode in HELD_BACK_MODES}
    return build(attribute(src), run=run_dir.name, device=src.device, evidence=evidence, whole=whole, tail=tail)


def write_board(run_dir: Path, out_dir: Path, board: Board | None = None) -> list[Path]:
    """``gaps.md``, ``gaps.html`` and ``gaps.json`` of the run in ``out_dir``, atomically."""
    board = board if board is not None else compute(run_dir)
    written = []
    for fmt, name in BOARD_FILES.items():
        atomic_write_text(out_dir / name, render.render(board, fmt))
        written.append(out_dir / name)
    return written


def report_section(run_dir: Path, out_dir: Path) -> list[str]:
    """The report's "What to implement next" section: the top gaps, linked to the full board,
    which it writes into ``out_dir`` first. A run the board cannot read (no CPU capture) gets
    a section that says why."""
    try:
        board = compute(run_dir)
    except BadInputError as exc:
        return ["## What to implement next", "", f"No gap board: {exc}", ""]
    write_board(run_dir, out_dir, board)
    links = f"Full board: [{BOARD_FILES['html']}]({BOARD_FILES['html']}) (the picture), " \
            f"[{BOARD_FILES['markdown']}]({BOARD_FILES['markdown']}), [{BOARD_FILES['json']}]({BOARD_FILES['json']})."
    if not board.ranked():
        return ["## What to implement next", "", headline(board) + ".", "", links, ""]
    return render.markdown(board, top=REPORT_TOP, heading="##") + ["", links, ""]
