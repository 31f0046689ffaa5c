"""The LLM brain through ``testcurator run --brain llm --no-execute`` on a small tree, against
a local OpenAI-compatible server (tests/pipelines/conftest.py) that reads each batch and
answers it: valid answers, endpoint faults (429, 500, malformed JSON, a timeout) that are
retried and answered or fall back, and answers the rails must reject.

One run per scenario (module-scoped), several assertions per run: each run starts a
collect-only pytest, the costly part.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fake_openai import Status, delayed, malformed
from testcurator.agents import rails
from testcurator.agents.brain import (
    BackendContext,
    BucketRequest,
    ExecutionRecord,
    RefineRequest,
)
from testcurator.agents.decision import Decision

NOT_A_TEST = "TestSmallViews::test_no_such_test"
OUTSIDE = "../../outside/test_escape.py"
VALID_MODES = {"TestSmallMath::test_add_float": "mandatory_success", "TestSmallMath::test_zeros_sum": "mandatory_success",
               "TestSmallMath::test_mul_matches_cpu": "xfail_strict", "TestSmallViews::test_view_shares_storage": "skip"}


@dataclass
class LLMRun:
    """One ``testcurator run --brain llm``: what the server saw, and what the run wrote,
    read at once (a later run over the same output folder overwrites it)."""

    root: Path
    out: Path
    state: Path
    model: str
    rc: int
    requests: int  # requests the server received during the run
    kinds: list[str]  # the answer model each request asked for, in order
    report: dict[str, Any]
    markdown: str
    configs: dict[str, bytes]
    entries: dict[str, Any]  # file::Class::test -> kit.Entry

    def again(self, kit: ModuleType, server: Any) -> LLMRun:
        """The same command again (same inputs, out and state)."""
        return _run(kit, server, self.root, "again", self.model, out=self.out, state=self.state)


def _run(kit: ModuleType, server: Any, root: Path, name: str, model: str, *, out: Path | None = None,
         state: Path | None = None) -> LLMRun:
    tree, backend = root / "upstream", root / "backend" / "backend.yaml"
    out = out or root / f"out-{name}"
    state = state or root / f"state-{name}"
    before = len(server.requests)
    rc = kit.run_cli(tree, backend, out, state, "--brain", "llm", "--no-execute", "--no-embed", "--no-capture-ops",
                     "--llm-base-url", server.base_url, "--llm-model", model)
    done = rc == 0
    return LLMRun(root, out, state, model, rc, len(server.requests) - before, server.kinds[before:],
                  kit.read_report(out) if done else {},
                  (out / "report.md").read_text(encoding="utf-8") if done else "", kit.config_bytes(out / "configs") if done else {},
                  kit.entries(out / "configs", tree) if done else {})


@pytest.fixture(scope="module")
def small(kit: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("small")
    kit.write_small_tree(root)
    return root


@pytest.fixture(scope="module")
def fast_client(kit: ModuleType) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        kit.fast_llm_settings(mp, timeout=1.0, max_retries=1)
        yield


@pytest.fixture(scope="module")
def valid(kit: ModuleType, llm_server: Any, small: Path, fast_client: None) -> tuple[LLMRun, LLMRun]:
    llm_server.reset(kit.Policy(modes=dict(VALID_MODES)))
    first = _run(kit, llm_server, small, "valid", "fake-valid")
    return first, first.again(kit, llm_server)


def test_valid_answers_become_the_configs(kit: ModuleType, valid: tuple[LLMRun, LLMRun]) -> None:
    run = valid[0]
    assert run.rc == 0
    expected = {f"test/test_small_math.py::{t}" for t in kit.MATH_TESTS} | {f"test/test_small_views.py::{t}" for t in kit.VIEW_TESTS}
    assert set(run.entries) == expected
    for key, entry in run.entries.items():
        mode = VALID_MODES.get(entry.test, "xfail")
        assert entry.mode == mode, key
        assert entry.reason == f"fake-llm chose {mode} for {entry.test} [llm]"
    assert run.report["brains"] == {"llm": 5}
    assert run.report["usage"]["fallbacks"] == 0 and run.report["usage"]["rail_violations"] == 0
    # One scope batch, one bucket batch per kept file; nothing else.
    assert run.kinds == ["ScopeAnswer", "BucketAnswer", "BucketAnswer"] and run.report["usage"]["calls"] == 3
    scope = {s["path"]: s for s in run.report["scope"]}
    assert set(scope) == set(kit.SMALL_CANDIDATES)
    assert not scope["test/distributed"]["keep"] and scope["test/distributed"]["reason"] == "fake-llm drops test/distributed"
    assert not any(path.startswith("test/distributed") for path in run.configs)
    assert "llm 5" in run.markdown and "calls 3" in run.markdown


def test_rerun_over_unchanged_inputs_makes_no_call(kit: ModuleType, valid: tuple[LLMRun, LLMRun]) -> None:
    first, rerun = valid
    assert rerun.rc == 0
    assert kit.main(["validate", str(rerun.out / "configs"), "--torch-root", str(rerun.root / "upstream")]) == 0
    assert rerun.requests == 0
    assert rerun.configs == first.configs
    assert rerun.report["usage"]["calls"] == 0
    assert rerun.report["usage"]["cached_items"] == 3 + 5  # every scope path and every test, from the cache
    assert rerun.report["brains"] == {"llm": 5}


@pytest.fixture(scope="module")
def retried(kit: ModuleType, llm_server: Any, small: Path, fast_client: None) -> LLMRun:
    """429 on scope; on the first bucket batch a 500, then malformed JSON (re-asked), then a
    timeout: all retried, and every decision ends up the model's."""
    llm_server.reset(kit.Policy())
    llm_server.fault("ScopeAnswer", Status(429))
    llm_server.fault("BucketAnswer", Status(500), malformed(), delayed({"decisions": []}, 2.5))
    return _run(kit, llm_server, small, "retried", "fake-retried")


def test_transient_faults_are_retried_then_answered(retried: LLMRun) -> None:
    assert retried.rc == 0
    # scope: 429 + answer; batch 1: 500, malformed, timeout, answer; batch 2: answer.
    assert retried.kinds == ["ScopeAnswer"] * 2 + ["BucketAnswer"] * 5
    assert retried.report["brains"] == {"llm": 5}
    usage = retried.report["usage"]
    assert usage["fallbacks"] == 0
    assert usage["failures"] == 1 and usage["reasks"] == 1  # the malformed answer, re-asked once
    assert usage["calls"] == 4  # HTTP retries inside the openai client are not calls (nor reported)
    assert all(e.reason.endswith("[llm]") for e in retried.entries.values())
    assert "failures 1" in retried.markdown and "reasks 1" in retried.markdown


@pytest.fixture(scope="module")
def exhausted(kit: ModuleType, llm_server: Any, small: Path, fast_client: None) -> LLMRun:
    """Batch 1 (3 tests) gets malformed JSON on every try; batch 2 (2 tests) a timeout, then
    a 500 on the client's retry: both fall back to the offline brain."""
    llm_server.reset(kit.Policy())
    llm_server.fault("BucketAnswer", malformed(), malformed(), malformed(), delayed({"decisions": []}, 2.5), Status(500))
    return _run(kit, llm_server, small, "exhausted", "fake-exhausted")


def test_unanswered_batches_fall_back_to_offline(exhausted: LLMRun) -> None:
    assert exhausted.rc == 0
    assert exhausted.kinds == ["ScopeAnswer"] + ["BucketAnswer"] * 5
    assert exhausted.report["brains"] == {"llm->offline": 5}
    usage = exhausted.report["usage"]
    assert usage["fallbacks"] == 5 and usage["failures"] == 3 + 1 and usage["reasks"] == 2
    for key, entry in exhausted.entries.items():
        assert entry.reason.endswith("[llm->offline]"), key
        why = "invalid answer after 3 tries" if entry.file.endswith("math.py") else "endpoint error: InternalServerError"
        assert f"llm answer rejected: {why}" in entry.reason, key
    assert "llm->offline 5" in exhausted.markdown and "fallbacks 5" in exhausted.markdown


@pytest.fixture(scope="module")
def one_outage(kit: ModuleType, llm_server: Any, small: Path, fast_client: None) -> LLMRun:
    """One endpoint failure (500 on both tries) on the first bucket batch, of 3 tests."""
    llm_server.reset(kit.Policy())
    llm_server.fault("BucketAnswer", Status(500), Status(500))
    return _run(kit, llm_server, small, "outage", "fake-outage")


def test_one_endpoint_failure_falls_back_instead_of_stopping(one_outage: LLMRun) -> None:
    assert one_outage.rc == 0
    assert one_outage.report["brains"] == {"llm->offline": 3, "llm": 2}


@pytest.fixture(scope="module")
def railed(kit: ModuleType, llm_server: Any, small: Path, fast_client: None) -> tuple[LLMRun, LLMRun]:
    """Answers the rails must reject: a scope path outside the tree, a test that does not
    exist (instead of a real one), and an unsupported-op test as mandatory_success. The model
    repeats itself when re-asked, so each ends with the offline brain."""
    llm_server.reset(kit.Policy(modes={"TestSmallMath::test_mul_matches_cpu": "mandatory_success"},
                                rename={"test/test_small_views.py": OUTSIDE, "TestSmallViews::test_reshape_numel": NOT_A_TEST}))
    first = _run(kit, llm_server, small, "railed", "fake-railed")
    return first, first.again(kit, llm_server)


def test_rails_reject_and_fall_back(kit: ModuleType, railed: tuple[LLMRun, LLMRun]) -> None:
    run = railed[0]
    assert run.rc == 0
    # Each rejected batch is re-asked exactly once.
    assert run.kinds == ["ScopeAnswer"] * 2 + ["BucketAnswer"] * 4
    scope = {s["path"]: s for s in run.report["scope"]}
    assert set(scope) == set(kit.SMALL_CANDIDATES)  # the outside path never enters the decisions
    # The reason says the answer was rejected, not which rail (test_report_names_what_the_rails_rejected).
    assert "llm answer rejected: rail missing" in scope["test/test_small_views.py"]["reason"]
    assert scope["test/test_small_math.py"]["reason"] == "fake-llm keeps test/test_small_math.py"

    assert not any(NOT_A_TEST in key for key in run.entries)
    mul = run.entries["test/test_small_math.py::TestSmallMath::test_mul_matches_cpu"]
    assert mul.mode != "mandatory_success"
    assert mul.reason.endswith("[llm->offline]") and "rail unsupported_mandatory" in mul.reason
    reshape = run.entries["test/test_small_views.py::TestSmallViews::test_reshape_numel"]
    assert reshape.reason.endswith("[llm->offline]") and "llm answer rejected" in reshape.reason
    # What the rails accepted stays the model's.
    assert run.entries["test/test_small_math.py::TestSmallMath::test_add_float"].reason.endswith("[llm]")
    assert run.report["brains"] == {"llm": 3, "llm->offline": 2}
    usage = run.report["usage"]
    assert usage["fallbacks"] == 3  # one scope path and two tests
    # scope: outside + missing, twice; math: unsupported mandatory, twice; views: unknown + missing, twice.
    assert usage["rail_violations"] == 4 + 2 + 4
    assert "llm->offline 2" in run.markdown and "rail_violations 10" in run.markdown


def test_rejected_answers_are_not_asked_again(railed: tuple[LLMRun, LLMRun]) -> None:
    first, rerun = railed
    assert rerun.rc == 0 and rerun.requests == 0
    assert rerun.configs == first.configs


def test_report_names_what_the_rails_rejected(railed: tuple[LLMRun, LLMRun]) -> None:
    text = json.dumps(railed[0].report)
    assert OUTSIDE in text and NOT_A_TEST in text


def test_rails_accept_a_module_exclusion_that_explains_the_failures() -> None:
    request = RefineRequest(BucketRequest("TestModule::test_forward", "test/test_nn.py", "h", modules=("nn.Linear", "nn.ReLU")),
                            None, (ExecutionRecord("v-linear", ("failed", "failed"), module="nn.Linear", failure_class="unsupported_op"),
                                   ExecutionRecord("v-relu", ("passed",), module="nn.ReLU")))
    decision = Decision("TestModule::test_forward", "mandatory_success", "why", (), "offline", None, exclude_modules=("nn.Linear",))
    assert rails.check_bucket([decision], [request], {"TestModule::test_forward"}, BackendContext("dev", "dev")) == []
