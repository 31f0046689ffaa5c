"""Rails before disk (pipelines/emit_guard.py): an LLM decision whose config entry would not
pass ``validate --level 2`` is decided by the offline brain before anything is written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from testcurator.agents.decision import FALLBACK_BRAIN, LLM_BRAIN, Decision
from testcurator.config.layout import config_path
from testcurator.config.levels import level2_problems
from testcurator.config.profile import BackendProfile, load_profile
from testcurator.pipelines import emit as emitter
from testcurator.pipelines.emit_guard import UnvalidatedConfigError, check_before_disk
from testcurator.pipelines.store import RunStore

EXAMPLE_PROFILE = Path(__file__).resolve().parents[2] / "examples" / "backend" / "backend.yaml"
REL = "test/test_guarded.py"
SOURCE = '''
import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase, run_tests


class TestGuarded(TestCase):
    @dtypes(torch.float32, torch.float64)
    def test_add(self, device, dtype):
        self.assertEqual(torch.ones(2, device=device, dtype=dtype).sum().item(), 2)

    def test_plain(self, device):
        self.assertTrue(torch.zeros(1, device=device).eq(0).all())


instantiate_device_type_tests(TestGuarded, globals())

if __name__ == "__main__":
    run_tests()
'''


def _decision(test: str, brain: str, mode: str = "mandatory_success", **edits: tuple[str, ...]) -> Decision:
    return Decision(test=test, mode=mode, reason=f"{brain} says {mode}", evidence=(), brain=brain, prompt_hash=None,
                    **edits)  # type: ignore[arg-type]


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, RunStore, BackendProfile, Path]:
    root = tmp_path / "torch"
    (root / "test").mkdir(parents=True)
    (root / REL).write_text(SOURCE, encoding="utf-8")
    profile, _ = load_profile(EXAMPLE_PROFILE)
    return root, RunStore(tmp_path / "run"), profile, tmp_path / "out" / "configs"


def _emitter(root: Path, store: RunStore, profile: BackendProfile):  # type: ignore[no-untyped-def]
    def emit_into(folder: Path) -> None:
        sidecar = emitter.load_sidecar(folder)
        emitter.emit_file(folder, root, profile, REL, store.read_decisions("bucket", REL) or [], sidecar, set(),
                          emitter.EmitResult())
        emitter.save_sidecar(folder, sidecar)
    return emit_into


def _offline(decisions: Mapping[str, Decision]):  # type: ignore[no-untyped-def]
    asked: list[tuple[str, tuple[str, ...]]] = []

    def redecide(rel: str, tests: Sequence[str]) -> Mapping[str, Decision]:
        asked.append((rel, tuple(tests)))
        return {t: decisions[t] for t in tests}
    return redecide, asked


@pytest.mark.parametrize("edit, problem", [
    ({"exclude_dtypes": ("int8",)}, "dtype int8 of the dtypes edit on TestGuarded::test_add never occurs"),
    ({"exclude_ops": ("add",)}, "ops edit on TestGuarded::test_add, which is not an @ops test"),
])
def test_an_llm_entry_that_would_not_validate_is_decided_offline_first(
        setup: tuple[Path, RunStore, BackendProfile, Path], edit: dict[str, tuple[str, ...]], problem: str) -> None:
    root, store, profile, configs = setup
    store.write_decisions("bucket", REL, [_decision("TestGuarded::test_add", LLM_BRAIN, **edit),
                                         _decision("TestGuarded::test_plain", LLM_BRAIN)])
    redecide, asked = _offline({"TestGuarded::test_add": _decision("TestGuarded::test_add", "offline", "xfail_strict")})
    redone = check_before_disk(configs, root, store, "bucket", [REL], _emitter(root, store, profile), redecide)
    assert redone == [f"{REL}::TestGuarded::test_add"] and asked == [(REL, ("TestGuarded::test_add",))]
    assert not configs.exists()  # the check wrote nothing where the configs go
    add, plain = store.read_decisions("bucket", REL) or []
    assert (add.brain, add.mode, plain.brain) == (FALLBACK_BRAIN, "xfail_strict", LLM_BRAIN)
    assert problem in add.reason and "not the LLM's decision: its config entry did not validate" in add.reason
    _emitter(root, store, profile)(configs)
    assert level2_problems([config_path(configs, REL)], torch_root=root) == []


def test_valid_llm_entries_pass_untouched(setup: tuple[Path, RunStore, BackendProfile, Path]) -> None:
    root, store, profile, configs = setup
    decisions = [_decision("TestGuarded::test_add", LLM_BRAIN, exclude_dtypes=("float64",)),
                 _decision("TestGuarded::test_plain", LLM_BRAIN, "skip")]
    store.write_decisions("bucket", REL, decisions)
    redecide, asked = _offline({})
    assert check_before_disk(configs, root, store, "bucket", [REL], _emitter(root, store, profile), redecide) == []
    assert asked == [] and store.read_decisions("bucket", REL) == decisions


def test_a_fallback_that_still_fails_stops_before_anything_is_written(
        setup: tuple[Path, RunStore, BackendProfile, Path]) -> None:
    root, store, profile, configs = setup
    bad = _decision("TestGuarded::test_add", LLM_BRAIN, exclude_dtypes=("int8",))
    store.write_decisions("bucket", REL, [bad])
    # A fallback with the same broken edit (a bug in its rules): no second chance, no file.
    redecide, _ = _offline({"TestGuarded::test_add": _decision("TestGuarded::test_add", LLM_BRAIN, exclude_dtypes=("int8",))})
    with pytest.raises(UnvalidatedConfigError, match="dtype int8"):
        check_before_disk(configs, root, store, "bucket", [REL], _emitter(root, store, profile), redecide)
    assert not configs.exists()


def test_a_new_problem_no_llm_answer_caused_stops_the_run(setup: tuple[Path, RunStore, BackendProfile, Path]) -> None:
    root, store, profile, configs = setup
    store.write_decisions("bucket", REL, [_decision("TestGuarded::test_plain", LLM_BRAIN),
                                         _decision("TestGuarded::test_add", "offline", exclude_dtypes=("int8",))])
    redecide, asked = _offline({})
    with pytest.raises(UnvalidatedConfigError, match="dtype int8"):
        check_before_disk(configs, root, store, "bucket", [REL], _emitter(root, store, profile), redecide)
    assert asked == [] and not configs.exists()


def test_a_problem_the_configs_already_had_is_not_the_guards(setup: tuple[Path, RunStore, BackendProfile, Path]) -> None:
    root, store, profile, configs = setup
    emit_into = _emitter(root, store, profile)
    store.write_decisions("bucket", REL, [_decision("TestGuarded::test_add", "offline", exclude_dtypes=("int8",))])
    emit_into(configs)
    path = config_path(configs, REL)  # a human's entry with a problem, from before this run
    path.write_text(path.read_text().replace("offline says mandatory_success", "a human keeps this"))
    store.write_decisions("bucket", REL, [_decision("TestGuarded::test_plain", LLM_BRAIN)])
    redecide, asked = _offline({})
    assert check_before_disk(configs, root, store, "bucket", [REL], emit_into, redecide) == [] and asked == []
    emit_into(configs)
    assert "a human keeps this" in path.read_text() and level2_problems([path], torch_root=root)  # still there
