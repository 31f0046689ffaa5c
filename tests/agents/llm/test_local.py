"""The local server's launch settings (the server itself: tests/pipelines/test_llm_real_server.py)."""

from __future__ import annotations

import json
from pathlib import Path

from jinja2.sandbox import ImmutableSandboxedEnvironment

from testcurator.agents.llm.local import CHAT_TEMPLATE, MODEL_ALIAS, LocalServer


def test_chat_template_keeps_the_system_message_in_gemmas_first_user_turn() -> None:
    # llama-cpp-python's built-in "gemma" format drops system messages: every instruction
    # of our prompts (and, below json_schema, the answer's schema) would be lost.
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    messages = [{"role": "system", "content": "RULES"}, {"role": "user", "content": "Q1"},
                {"role": "assistant", "content": "A1"}, {"role": "user", "content": "Q2"},
                {"role": "assistant", "content": ""}]  # the server's generation prompt
    prompt = env.from_string(CHAT_TEMPLATE).render(messages=messages, bos_token="<bos>", eos_token="<end_of_turn>")
    assert prompt == ("<bos><start_of_turn>user\nRULES\n\nQ1<end_of_turn>\n<start_of_turn>model\nA1<end_of_turn>\n"
                      "<start_of_turn>user\nQ2<end_of_turn>\n<start_of_turn>model\n")


def test_server_command_and_the_variables_that_point_the_brain_at_it(tmp_path: Path) -> None:
    server = LocalServer(tmp_path / "model.gguf", port=8123, context_tokens=4096, threads=1)
    cmd = server.command()
    assert cmd[1:3] == ["-m", "testcurator.agents.llm.server"] and cmd[cmd.index("--n_ctx") + 1] == "4096"
    assert cmd[cmd.index("--chat_format") + 1] == "hf-tokenizer-config" and cmd[cmd.index("--host") + 1] == "127.0.0.1"
    config = json.loads(Path(cmd[cmd.index("--hf_tokenizer_config_path") + 1]).read_text())
    assert config["chat_template"] == CHAT_TEMPLATE and config["eos_token"] == "<end_of_turn>"
    assert server.env() == {"OPENAI_BASE_URL": "http://127.0.0.1:8123/v1", "TESTCURATOR_LLM_MODEL": MODEL_ALIAS,
                            "TESTCURATOR_LLM_CONTEXT_TOKENS": "4096"}
