"""A rerun with nothing changed runs nothing and says whose results stand; any change of its
key, of the configs in --out, a failed last run or an old one runs again."""

from __future__ import annotations

import shutil
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from testcurator.cli.main import main
from testcurator.memory.history import History
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.nights import uptodate
from testcurator.pipelines.store import RunStore

REPO = Path(__file__).resolve().parents[3]
BACKEND = REPO / "examples" / "backend" / "backend.yaml"

SMALL = '''\
import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase, run_tests


class TestSmall(TestCase):
    @dtypes(torch.float32)
    def test_add(self, device, dtype):
        x = torch.ones(3, device=device, dtype=dtype)
        self.assertEqual((x + x).cpu(), torch.full((3,), 2.0))

    def test_zeros(self, device):
        self.assertEqual(torch.zeros(2, device=device).sum().item(), 0)


instantiate_device_type_tests(TestSmall, globals())

if __name__ == "__main__":
    run_tests()
'''


def _run(tree: Path, out: Path, state: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    code = main(["run", "--torch-root", str(tree), "--backend", str(BACKEND), "--out", str(out), "--state-dir",
                 str(state), "--no-embed", "--no-capture-ops", "--no-probe", "--retries", "0", *extra])
    return code, capsys.readouterr().out


def _runs(state: Path) -> list[str]:
    return sorted(p.name for p in (state / "runs").iterdir() if p.is_dir())


@pytest.mark.slow
def test_a_rerun_with_nothing_changed_runs_nothing_and_a_changed_config_runs_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    tree, out, state = tmp_path / "upstream", tmp_path / "out", tmp_path / "state"
    checked: list[Path] = []  # the preflight checks (a backend import, a pytest start), each time they run
    preflight = RunContext.preflight
    monkeypatch.setattr(RunContext, "preflight", lambda ctx: (checked.append(ctx.torch_root), preflight(ctx))[1])
    (tree / "test").mkdir(parents=True)
    (tree / "test" / "test_small.py").write_text(SMALL, encoding="utf-8")
    shutil.copy(REPO / "examples" / "upstream" / "pytest.ini", tree / "pytest.ini")
    code, first = _run(tree, out, state, capsys)
    assert code == 0, first
    assert len(checked) == 1 and (state / "preflight" / "harness.log").is_file()  # the tree has a pytest.ini
    (cold,) = _runs(state)
    report = (out / "report.json").read_bytes()
    configs = {p: p.read_bytes() for p in (out / "configs").rglob("*.yaml")}

    code, again = _run(tree, out, state, capsys)
    assert code == 0, again
    assert f"up to date: nothing changed since run {cold}" in again
    assert _runs(state) == [cold]  # no run folder, no history entry, no test run
    assert len(checked) == 1  # nor the preflight's backend import and pytest start
    assert "memory:" not in again and "judge:" not in again
    assert (out / "report.json").read_bytes() == report
    assert {p: p.read_bytes() for p in (out / "configs").rglob("*.yaml")} == configs
    assert again.splitlines()[-1].startswith(f"as run {cold} found: ")
    with History(state) as history:
        assert [r.run_id for r in history.runs(str(out.resolve()))] == [cold]

    # A config edited by hand is not what that run verified: it is judged again.
    yaml = next(iter(configs))
    yaml.write_text(yaml.read_text(encoding="utf-8") + "# reviewed\n", encoding="utf-8")
    code, edited = _run(tree, out, state, capsys)
    assert code == 0, edited
    assert "up to date" not in edited and "judge: passed" in edited
    assert len(_runs(state)) == 2 and len(checked) == 2

    ctx = RunContext.create(torch_root=tree, backend=BACKEND, out_dir=out, state_dir=state, execute=True,
                            embed=False, capture_ops=False, probe=False, retries=0, reuse_within_s=3600.0)
    key = uptodate.run_key(ctx)
    assert key == RunStore(state / "runs" / _runs(state)[-1]).read_json(uptodate.RUN_KEY)
    assert uptodate.unchanged_since(ctx, key, 3600.0) is not None
    later = datetime.now(timezone.utc) + timedelta(hours=2)
    assert uptodate.unchanged_since(ctx, key, 3600.0, now=later) is None  # a night later runs again
    assert uptodate.unchanged_since(ctx, key, 0) is None
    assert uptodate.unchanged_since(ctx, {**key, "torch": "2.99"}, 3600.0) is None
    assert uptodate.run_key(replace(ctx, timeout=5.0)) != key  # a setting is part of the key
    assert uptodate.unchanged_since(replace(ctx, resume=True), key, 3600.0) is None
    with History(state) as history:
        history.set_exit_code(_runs(state)[-1], 1)
    assert uptodate.unchanged_since(ctx, key, 3600.0) is None  # a red night always runs again
