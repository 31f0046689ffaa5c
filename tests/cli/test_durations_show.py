"""`durations show` on a narrow terminal: node ids wrap at `::`, `/`, `_`, whole."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from testcurator.cli.groups import durations as durations_cmds
from testcurator.cli.main import main

IDS = ["test/nn/test_convolution.py::TestConvolutionNNDeviceTypeCPU::test_conv_double_backward_strided_with_3D_input_cpu",
       "test/test_ops.py::TestCommonCPU::test_noncontiguous_samples_nn_functional_conv_transpose3d_cpu_complex64"]


def test_node_ids_wrap_at_segments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "d.json").write_text(json.dumps({IDS[0]: 2.5, IDS[1]: 1.0}))
    state = tmp_path / "state"
    assert main(["durations", "import", str(tmp_path / "d.json"), "--state-dir", str(state)]) == 0
    out = io.StringIO()
    monkeypatch.setattr(durations_cmds, "console", Console(file=out, width=80, color_system=None, highlight=False))
    assert main(["durations", "show", "--state-dir", str(state)]) == 0
    rows = [line.split("│")[1:4] for line in out.getvalue().splitlines() if line.startswith("│")]
    assert rows and all(len(line) <= 80 for line in out.getvalue().splitlines())
    ids: list[str] = []
    current = ""
    for seconds, _source, node in rows:
        if seconds.strip() and current:
            ids.append(current)
            current = ""
        piece = node.strip()
        assert not current or current.endswith(("::", "_", "/")), (current, piece)  # broke at a segment
        current += piece
    ids.append(current)
    assert ids == IDS  # slowest first, each whole
    assert len(rows) > len(IDS)  # they did wrap at 80 columns
