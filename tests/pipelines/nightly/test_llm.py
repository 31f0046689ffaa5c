"""The LLM brain through ``testcurator run --brain llm --no-execute`` on a small tree, against
a local OpenAI-compatible server (tests/pipelines/conftest.py) that reads each batch and
answers it: valid answers, endpoint faults (429, 500, malformed JSON, a timeout) that are
retried and answered or fall back, and answers the rails must reject.

One run per scenario (module-scoped), several assertions per run: each run starts a
collect-only pytest, the costly part.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fake_openai import LLAMA_CPP_PYTHON_REJECTS, Status, format_mode, hung, malformed
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
         state: Path | None = None, base_url: str | None = None, embed: bool = False, extra: tuple[str, ...] = ()) -> LLMRun:
    tree, backend = root / "upstream", root / "backend" / "backend.yaml"
    out = out or root / f"out-{name}"
    state = state or root / f"state-{name}"
    before = len(server.requests)
    rc = kit.run_cli(tree, backend, out, state, "--brain", "llm", "--no-execute", "--embed" if embed else "--no-embed",
                     "--no-capture-ops", "--llm-base-url", base_url or server.base_url, "--llm-model", model, *extra)
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
        # The scripted timeouts are hung() requests, which wait out this timeout: wide enough
        # that no answered request reaches it on a loaded machine (one would be retried and
        # shift the exact call counts below), short enough to keep those waits brief.
        kit.fast_llm_settings(mp, timeout=3.0, max_retries=1)
        yield


@pytest.fixture(scope="module")
def valid(kit: ModuleType, llm_server: Any, small: Path, fast_client: None) -> tuple[LLMRun, LLMRun]:
    llm_server.reset(kit.Policy(modes=dict(VALID_MODES)))
    first = _run(kit, llm_server, small, "valid", "fake-valid")
    return first, first.again(kit, llm_server)


@pytest.mark.slow
def test_valid_answers_become_the_configs(kit: ModuleType, valid: tuple[LLMRun, LLMRun]) -> None:
    run = valid[0]
    assert run.rc == 0
    expected = {f"test/test_small_math.py::{t}" for t in kit.MATH_TESTS} | {f"test/test_small_views.py::{t}" for t in kit.VIEW_TESTS}
    assert set(run.entries) == expected
    for key, entry in run.entries.items():
        mode = VALID_MODES.get(entry.test, "xfail")
        assert entry.mode == mode, key
        assert entry.reason == f"the fake model chose {mode} for {entry.test} [llm]"
    assert run.report["brains"] == {"llm": 5}
    assert run.report["usage"]["fallbacks"] == 0 and run.report["usage"]["rail_violations"] == 0
    # One scope batch, one bucket batch per kept file; nothing else.
    assert run.kinds == ["ScopeAnswer", "BucketAnswer", "BucketAnswer"] and run.report["usage"]["calls"] == 3
    scope = {s["path"]: s for s in run.report["scope"]}
    assert set(scope) == set(kit.SMALL_CANDIDATES)
    assert not scope["test/distributed"]["keep"] and scope["test/distributed"]["reason"] == "the fake model drops test/distributed"
    assert not any(path.startswith("test/distributed") for path in run.configs)
    assert "llm 5" in run.markdown and "calls 3" in run.markdown
    llm = run.report["llm"]
    assert llm["mode"] == "json_schema" and llm["llm_share"] == 1.0 and llm["down"] is None
    assert "structured output **json_schema**" in run.markdown and "LLM share of decisions: **100%**" in run.markdown


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
    """429 on scope; on the first bucket batch a 500, then malformed JSON (re-asked): all
    retried, and every decision ends up the model's. (A timeout is never re-sent: see
    ``exhausted``.)"""
    llm_server.reset(kit.Policy())
    llm_server.fault("ScopeAnswer", Status(429))
    llm_server.fault("BucketAnswer", Status(500), malformed())
    return _run(kit, llm_server, small, "retried", "fake-retried")


@pytest.mark.slow
def test_transient_faults_are_retried_then_answered(retried: LLMRun) -> None:
    assert retried.rc == 0
    # scope: 429 + answer; batch 1: 500, malformed, answer; batch 2: answer.
    assert retried.kinds == ["ScopeAnswer"] * 2 + ["BucketAnswer"] * 4
    assert retried.report["brains"] == {"llm": 5}
    usage = retried.report["usage"]
    assert usage["fallbacks"] == 0
    assert usage["failures"] == 1 and usage["reasks"] == 1  # the malformed answer, re-asked once
    assert usage["calls"] == 4  # HTTP retries inside the openai client are not calls (nor reported)
    assert all(e.reason.endswith("[llm]") for e in retried.entries.values())
    assert "failures 1" in retried.markdown and "reasks 1" in retried.markdown


@pytest.fixture(scope="module")
def exhausted(kit: ModuleType, llm_server: Any, small: Path, fast_client: None) -> LLMRun:
    """Batch 1 (3 tests) gets malformed JSON on every try; batch 2 (2 tests) silence until the
    idle timeout, never re-sent (the server may still be working on it): both fall back to
    the offline brain."""
    llm_server.reset(kit.Policy())
    llm_server.fault("BucketAnswer", malformed(), malformed(), malformed(), hung())
    return _run(kit, llm_server, small, "exhausted", "fake-exhausted")


@pytest.mark.slow
def test_unanswered_batches_fall_back_to_offline(exhausted: LLMRun) -> None:
    assert exhausted.rc == 0
    assert exhausted.kinds == ["ScopeAnswer"] + ["BucketAnswer"] * 4
    assert exhausted.report["brains"] == {"llm->offline": 5}
    usage = exhausted.report["usage"]
    assert usage["fallbacks"] == 5 and usage["failures"] == 3 + 1 and usage["reasks"] == 2
    assert len(exhausted.entries) == 5
    for key, entry in exhausted.entries.items():
        assert entry.reason.endswith("[llm->offline]"), key
        why = "invalid answer after 3 tries" if entry.file.endswith("math.py") else "endpoint error: APITimeoutError"
        assert f"not the LLM's decision: {why}" in entry.reason, key
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


@pytest.mark.slow
def test_rails_reject_and_fall_back(kit: ModuleType, railed: tuple[LLMRun, LLMRun]) -> None:
    run = railed[0]
    assert run.rc == 0
    # Each rejected batch is re-asked exactly once.
    assert run.kinds == ["ScopeAnswer"] * 2 + ["BucketAnswer"] * 4
    scope = {s["path"]: s for s in run.report["scope"]}
    assert set(scope) == set(kit.SMALL_CANDIDATES)  # the outside path never enters the decisions
    # The reason says the answer was rejected, not which rail (test_report_names_what_the_rails_rejected).
    assert "not the LLM's decision: rail missing" in scope["test/test_small_views.py"]["reason"]
    assert scope["test/test_small_math.py"]["reason"] == "the fake model keeps test/test_small_math.py"

    assert not any(NOT_A_TEST in key for key in run.entries)
    mul = run.entries["test/test_small_math.py::TestSmallMath::test_mul_matches_cpu"]
    assert mul.mode != "mandatory_success"
    assert mul.reason.endswith("[llm->offline]") and "rail unsupported_mandatory" in mul.reason
    reshape = run.entries["test/test_small_views.py::TestSmallViews::test_reshape_numel"]
    assert reshape.reason.endswith("[llm->offline]") and "not the LLM's decision" in reshape.reason
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


def test_rejected_answers_are_one_line_and_their_text_only_in_the_audit_log(railed: tuple[LLMRun, LLMRun]) -> None:
    """Issue 9: the reason names the failed rule in one line; what the model wrote (an
    invented test, a path outside the tree) is in the run's audit log, never in configs/."""
    run = railed[0]
    assert run.configs
    for path, data in run.configs.items():
        text = data.decode()
        assert OUTSIDE not in text and NOT_A_TEST not in text and "etc/passwd" not in text, path
    assert OUTSIDE not in run.markdown and NOT_A_TEST not in run.markdown
    reshape = run.entries["test/test_small_views.py::TestSmallViews::test_reshape_numel"]
    assert reshape.reason is not None and "\n" not in reshape.reason
    assert "rail missing: no decision for this request" in reshape.reason
    assert "the answer named 1 name not asked about (rail unknown_test)" in reshape.reason
    audit = (run.state / "llm_audit.jsonl").read_text(encoding="utf-8")
    assert OUTSIDE in audit and NOT_A_TEST in audit
    assert run.report["llm"]["audit_records"] >= 4 and "llm_audit.jsonl" in run.markdown


def test_rails_accept_a_module_exclusion_that_explains_the_failures() -> None:
    request = RefineRequest(BucketRequest("TestModule::test_forward", "test/test_nn.py", "h", modules=("nn.Linear", "nn.ReLU")),
                            None, (ExecutionRecord("v-linear", ("failed", "failed"), module="nn.Linear", failure_class="unsupported_op"),
                                   ExecutionRecord("v-relu", ("passed",), module="nn.ReLU")))
    decision = Decision("TestModule::test_forward", "mandatory_success", "why", (), "offline", None, exclude_modules=("nn.Linear",))
    assert rails.check_bucket([decision], [request], {"TestModule::test_forward"}, BackendContext("dev", "dev")) == []


@pytest.fixture(scope="module")
def negotiated(kit: ModuleType, llm_server: Any, small: Path, fast_client: None) -> LLMRun:
    """A server that refuses json_schema the way llama-cpp-python's does (HTTP 500)."""
    llm_server.reset(kit.Policy(modes=dict(VALID_MODES)))
    llm_server.reject_formats = {"json_schema": LLAMA_CPP_PYTHON_REJECTS}
    before = len(llm_server.rejected)
    run = _run(kit, llm_server, small, "negotiated", "fake-negotiated")
    run.rejected = len(llm_server.rejected) - before  # type: ignore[attr-defined]
    run.modes = [format_mode(b) for b in llm_server.requests[-run.requests:]]  # type: ignore[attr-defined]
    return run


@pytest.mark.slow
def test_a_refused_format_is_negotiated_down_not_fatal(kit: ModuleType, negotiated: LLMRun) -> None:
    run = negotiated
    assert run.rc == 0
    assert run.rejected == 1  # once per endpoint and run: the mode is remembered
    assert run.modes == ["json_object_schema"] * 3
    assert run.report["brains"] == {"llm": 5}
    llm = run.report["llm"]
    assert llm["mode"] == "json_object_schema" and llm["usage"]["downshifts"] == 1
    assert "json_schema -> json_object_schema" in llm["negotiation"][0]
    assert "structured output **json_object_schema** (negotiated: json_schema -> json_object_schema" in run.markdown
    assert kit.main(["validate", str(run.out / "configs"), "--torch-root", str(run.root / "upstream")]) == 0


@pytest.fixture(scope="module")
def down(kit: ModuleType, llm_server: Any, small: Path, fast_client: None) -> LLMRun:
    """Nothing listens at the endpoint: retried with backoff, then the offline brain."""
    return _run(kit, llm_server, small, "down", "fake-down", base_url="http://127.0.0.1:9/v1")


def test_an_endpoint_that_is_down_leaves_the_offline_brain_deciding(kit: ModuleType, down: LLMRun) -> None:
    assert down.rc == 0 and down.requests == 0
    assert down.report["brains"] == {"llm->offline": 5}
    llm = down.report["llm"]
    assert llm["down"] and llm["llm_share"] == 0.0 and llm["usage"]["calls"] == 0
    assert llm["usage"]["transport_retries"] == 2  # the first two requests, one retry each; then none
    assert "**endpoint down**" in down.markdown and "LLM share of decisions: **0%**" in down.markdown
    assert len(down.entries) == 5
    for key, entry in down.entries.items():
        assert entry.reason is not None and "not the LLM's decision: endpoint" in entry.reason, key
    assert kit.main(["validate", str(down.out / "configs"), "--torch-root", str(down.root / "upstream")]) == 0


@pytest.fixture(scope="module")
def summarized(kit: ModuleType, llm_server: Any, small: Path) -> tuple[LLMRun, LLMRun, ModuleType]:
    """The LLM brain writes the memory's summaries (embedded); an offline run drops them."""
    llm_server.reset(kit.Policy(modes=dict(VALID_MODES)))
    with pytest.MonkeyPatch.context() as mp:
        kit.fast_llm_settings(mp, timeout=5.0, max_retries=1, summaries=True)
        first = _run(kit, llm_server, small, "summaries", "fake-summaries", embed=True)
        again = first.again(kit, llm_server)
    return first, again, kit


def _summary(state: Path, test: str) -> tuple[str, str]:
    from testcurator.memory.api import Memory

    with Memory.open(state) as memory:
        stored = memory.require_test(test)[0]
    return stored.summary, stored.summary_author


@pytest.mark.slow
def test_llm_summaries_are_written_cached_embedded_and_shown(summarized: tuple[LLMRun, LLMRun, ModuleType],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    first, again, kit = summarized
    assert first.rc == 0
    assert first.kinds.count("SummaryAnswer") == 2  # one per kept file
    assert _summary(first.state, "TestSmallMath::test_add_float") == (
        "fake-llm summary of TestSmallMath::test_add_float", "llm:fake-summaries")
    assert again.rc == 0 and again.requests == 0  # cached by content, prompt and model
    capsys.readouterr()
    assert kit.main(["memory", "show", "TestSmallMath::test_add_float", "--state-dir", str(first.state)]) == 0
    assert "summary (llm:fake-summaries): fake-llm summary of TestSmallMath::test_add_float" in capsys.readouterr().out
    # The embeddings hold the model's text: a query for its words finds that test first.
    from testcurator.memory.api import Memory

    with Memory.open(first.state) as memory:
        hit = memory.query("fake-llm summary of TestSmallViews::test_reshape_numel", k=1)[0]
    assert hit.tests[0].generic == "TestSmallViews::test_reshape_numel"
    # The offline brain reads offline summaries again, whatever ran before.
    tree, backend = first.root / "upstream", first.root / "backend" / "backend.yaml"
    assert kit.run_cli(tree, backend, first.root / "out-offline", first.state, "--no-execute", "--no-capture-ops") == 0
    text, author = _summary(first.state, "TestSmallMath::test_add_float")
    assert author == "offline" and "fake-llm" not in text


def test_llm_budget_s_caps_the_run_and_the_report_says_what_it_cost(kit: ModuleType, llm_server: Any, small: Path,
                                                                  fast_client: None) -> None:
    # A budget the first answer alone spends: that question (one path, to measure the
    # endpoint) is answered, nothing after it is sent, and every other decision is the
    # offline brain's, attributed to the budget (not to the endpoint).
    llm_server.reset(kit.Policy(modes=dict(VALID_MODES)))
    run = _run(kit, llm_server, small, "budget", "fake-budget", extra=("--llm-budget-s", "0.001"))
    assert run.rc == 0 and run.kinds == ["ScopeAnswer"]
    llm = run.report["llm"]
    assert llm["budget_s"] == 0.001 and llm["down"] is None
    assert llm["decisions_by_brain"] == {"llm": 1, "llm->offline": 7}
    assert llm["fallback_causes"] == {"time budget spent": 7} and llm["usage"]["over_budget"] == 7
    assert "not asked: the LLM's time budget (0.001 s) was spent" in run.markdown
    assert "decided by the offline brain instead, by why: time budget spent 7" in run.markdown
    assert kit.main(["validate", str(run.out / "configs"), "--torch-root", str(run.root / "upstream"), "--level", "2"]) == 0
