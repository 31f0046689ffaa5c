"""`testcurator refine` tells the pipeline's untouched entries from a person's (issue 9 item 6):
a machine-made xfail whose every instance passes is promoted; a hand-edited one waits for
review; without a readable configs/.emitted.json every entry counts as a person's."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testcurator.agents.decision import Decision
from testcurator.cli.main import main
from testcurator.config.loader import load_config
from testcurator.config.profile import load_profile
from testcurator.pipelines.emit import SIDECAR, EmitResult, emit_file, fingerprint, load_sidecar, save_sidecar

BACKEND = Path(__file__).resolve().parents[2] / "examples" / "backend" / "backend.yaml"
REL = "test/test_m.py"
UPSTREAM = textwrap.dedent('''
    import torch
    from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
    from torch.testing._internal.common_utils import TestCase


    class TestM(TestCase):
        @dtypes(torch.float32, torch.int64)
        def test_a(self, device, dtype):
            self.assertEqual(torch.ones(2, device=device, dtype=dtype).sum().item(), 2)

        def test_b(self, device):
            self.assertEqual(torch.zeros(2, device=device).sum().item(), 0)

        def test_c(self, device):
            self.assertTrue(torch.ones(1, device=device).bool().all())


    instantiate_device_type_tests(TestM, globals(), only_for="cpu")
''')


def _decision(test: str, mode: str, reason: str) -> Decision:
    return Decision(f"TestM::{test}", mode, reason, ("e",), "offline", "h")  # type: ignore[arg-type]


def _tree(root: Path) -> Path:
    """The pipeline's output for one file (emit_file, as nightly writes it), then a person's
    two edits: test_b's reason reworded, test_c's mode changed."""
    (root / "test").mkdir(parents=True)
    (root / REL).write_text(UPSTREAM)
    configs = root / "configs"
    sidecar: dict[str, dict[str, str]] = {}
    decisions = [_decision("test_a", "xfail", "Xfail: the brain guessed test_a fails."),
                 _decision("test_b", "xfail", "Xfail: the brain guessed test_b fails."),
                 _decision("test_c", "mandatory_success", "Mandatory success: test_c is core.")]
    emit_file(configs, root, load_profile(BACKEND)[0], REL, decisions, sidecar, set(), EmitResult())
    save_sidecar(configs, sidecar)
    path = configs / "test" / "test_m.yaml"
    text = path.read_text()
    edited = text.replace("the brain guessed test_b fails", "we know test_b fails on our board")
    head, tail = edited.split("TestM::test_c", 1)
    edited = head + "TestM::test_c" + tail.replace("mode: mandatory_success", "mode: xfail", 1)
    assert edited.count("mode: xfail") == 3 and edited != text
    path.write_text(edited)
    return configs


def _refine(root: Path, configs: Path) -> int:
    xml = root / "junit.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", REL, "--curate-config",
                           str(configs), "--curate-torch-root", str(root), f"--junitxml={xml}"],
                          cwd=root, capture_output=True, text=True, timeout=300, env={**os.environ})
    assert proc.returncode == 0 and "4 xpassed" in proc.stdout, proc.stdout[-2000:]
    return main(["refine", "--config", str(configs), "--torch-root", str(root), "--results", str(xml),
                 "--out", str(root / "out")])


@pytest.fixture(scope="module")
def refined(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("machine")
    configs = _tree(root)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):  # what `refine` says, kept for the tests below
        assert _refine(root, configs) == 0
    (root / "refine.log").write_text(buf.getvalue())
    return root


def _entry(root: Path, test: str) -> tuple[str, str]:
    entry = load_config(root / "configs", torch_root=root).files[0].entry_for(f"TestM::{test}")
    assert entry is not None
    return entry.mode, entry.reason or ""


def test_machine_made_xfail_that_passes_is_promoted(refined: Path) -> None:
    mode, reason = _entry(refined, "test_a")
    assert mode == "mandatory_success" and "promoted from xfail" in reason and "NEEDS REVIEW" not in reason


@pytest.mark.parametrize("test", ["test_b", "test_c"])  # reason reworded; mode changed by hand
def test_hand_edited_xfail_waits_for_review(refined: Path, test: str) -> None:
    mode, reason = _entry(refined, test)
    assert mode == "xfail" and "promoted" not in reason  # the person's entry stands as written
    said = " ".join((refined / "refine.log").read_text().split())
    assert f"TestM::{test}: xfail kept (a person's decision), for review: Xfail kept: " in said
    assert "promotion is proposed" in said


def test_sidecar_follows_the_promotion(refined: Path) -> None:
    """The promoted entry is still the pipeline's: a later run may change it again."""
    entry = load_config(refined / "configs", torch_root=refined).files[0].entry_for("TestM::test_a")
    assert entry is not None
    assert load_sidecar(refined / "configs")[REL]["TestM::test_a"] == fingerprint(entry.mode, entry.reason, entry.edits)


@pytest.mark.parametrize("sidecar", ["{not json", None], ids=["corrupt", "missing"])
@pytest.mark.slow
def test_without_sidecar_every_entry_is_a_persons(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   sidecar: str | None) -> None:
    configs = _tree(tmp_path)
    if sidecar is None:
        (configs / SIDECAR).unlink()
    else:
        (configs / SIDECAR).write_text(sidecar)
    assert _refine(tmp_path, configs) == 0
    mode, reason = _entry(tmp_path, "test_a")
    assert mode == "xfail" and "promoted" not in reason
    out = " ".join(capsys.readouterr().out.split())
    assert "every entry counts as a person's decision" in out
    assert ("unreadable" if sidecar else "no .emitted.json") in out
