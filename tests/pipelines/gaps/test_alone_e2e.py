"""The board's `alone` claim, end to end on the example backend (curatedev): the top-ranked op is
allowed (its CURATEDEV_ALLOWED_OPS allowlist) and the pipeline runs again; the tests the board
listed alone for it now pass on the device, and the op has left the board. The first run
executes nothing (the board of a run that did not execute reads its decisions, the probe and the
capture); the second, with the op allowed, runs the tests.

A tiny tree keeps it to two runs of one small file: sort and unfold are not in curatedev's
default allowlist, one test needs each alone, one needs both (shared), one needs neither.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from testcurator.cli.main import main
from testcurator.pipelines.gaps.files import compute
from testcurator.runner.results.records import read_jsonl
from testcurator.vocab import TestKey

REPO = Path(__file__).resolve().parents[3]
BACKEND = REPO / "examples" / "backend" / "backend.yaml"
POLICY = REPO / "examples" / "backend" / "curatedev" / "_policy.py"
TINY = '''\
import torch
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase, run_tests


class TestTiny(TestCase):
    def test_sorted(self, device):
        x = torch.tensor([3.0, 1.0, 2.0], device=device)
        self.assertEqual(torch.sort(x).values.cpu(), torch.tensor([1.0, 2.0, 3.0]))

    def test_windows(self, device):
        t = torch.arange(10.0, device=device)
        self.assertEqual(t.unfold(0, 3, 2).shape, (4, 3))

    def test_sorted_windows(self, device):
        t = torch.sort(torch.arange(10.0, device=device), descending=True).values
        self.assertEqual(t.unfold(0, 5, 5).shape, (2, 5))

    def test_add(self, device):
        x = torch.ones(3, device=device)
        self.assertEqual((x + x).cpu(), torch.full((3,), 2.0))


instantiate_device_type_tests(TestTiny, globals())

if __name__ == "__main__":
    run_tests()
'''


def _default_ops() -> list[str]:
    """curatedev's default allowlist, read from its source (importing it builds the extension)."""
    found: dict[str, tuple[str, ...]] = {}
    for node in ast.parse(POLICY.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Tuple):
            found.setdefault(node.targets[0].id, ast.literal_eval(node.value))
    return list(dict.fromkeys([*found["DEFAULT_OPS"], *found["COMPARISON_OPS"]]))


def _run(tree: Path, out: Path, state: Path, *flags: str) -> Path:
    assert main(["run", "--torch-root", str(tree), "--backend", str(BACKEND), "--out", str(out), "--state-dir",
                 str(state), "--no-embed", "--retries", "0", *flags]) == 0
    return Path(json.loads((state / "runs" / "latest.json").read_text(encoding="utf-8"))["run_dir"])


def _outcomes(run: Path) -> dict[TestKey, set[str]]:
    out: dict[TestKey, set[str]] = {}
    for rec in read_jsonl(run / "verify" / "results.jsonl"):
        out.setdefault(TestKey.of(TestKey.parse(rec.nodeid).file, rec.generic or ""), set()).add(rec.outcome)
    return out


@pytest.mark.slow
def test_allowing_the_top_op_frees_the_tests_listed_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree, state = tmp_path / "upstream", tmp_path / "state"
    (tree / "test").mkdir(parents=True)
    (tree / "test" / "test_tiny.py").write_text(TINY, encoding="utf-8")
    (tree / "pytest.ini").write_text("[pytest]\ntestpaths = test\naddopts = -p no:cacheprovider\n", encoding="utf-8")
    monkeypatch.delenv("CURATEDEV_ALLOWED_OPS", raising=False)
    # The first run executes nothing: its board comes from the decisions, the probe and the capture.
    before = compute(_run(tree, tmp_path / "out1", state, "--no-execute"))
    names = {str(g.id): g for g in before.gaps}
    assert {"aten::sort", "aten::unfold"} <= set(names)
    top = before.gaps[0]
    assert {t.name for t in top.alone} in ({"TestTiny::test_sorted"}, {"TestTiny::test_windows"})
    assert {t.name for t in top.shared} == {"TestTiny::test_sorted_windows"}
    assert [c.split(" --")[0] for c in top.commands] == [f"testcurator enable-op {top.id.name}"]

    monkeypatch.setenv("CURATEDEV_ALLOWED_OPS", ",".join([*_default_ops(), top.id.name]))
    run = _run(tree, tmp_path / "out2", state)
    outcomes = _outcomes(run)
    freed = [t for t in top.alone if outcomes.get(t) == {"passed"}]
    assert len(freed) >= 0.8 * len(top.alone), {str(t): outcomes.get(t) for t in top.alone}
    after = compute(run)
    assert top.id not in {g.id for g in after.ranked()}
    assert {str(g.id) for g in after.gaps} == set(names) - {str(top.id)}  # the other op still holds its test back
