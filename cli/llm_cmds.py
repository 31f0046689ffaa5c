"""`testcurator llm serve|check`: a local model server for the LLM brain, and a probe of any endpoint."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from pydantic import BaseModel
from rich.console import Console

from testcurator.agents.llm_local import DEFAULT_CONTEXT, DEFAULT_PORT, DEFAULT_THREADS, LocalServer, check_installed, packaged_model


class CheckAnswer(BaseModel):
    reasoning: str
    answer: bool


def serve_cmd(
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to listen on.")] = DEFAULT_PORT,
    host: Annotated[str, typer.Option("--host", help="Address to bind (loopback by default).")] = "127.0.0.1",
    context_tokens: Annotated[int, typer.Option("--context-tokens", min=512, help="Context window (n_ctx).")] = DEFAULT_CONTEXT,
    threads: Annotated[int, typer.Option("--threads", min=1, help="CPU threads for generation (default: half the cores).")] = DEFAULT_THREADS,
    model_dir: Annotated[Optional[Path], typer.Option("--model-dir", help="Where to assemble the GGUF (default: the package's cache).")] = None,
) -> None:
    """Serve the packaged Gemma 3 270M on a local OpenAI-compatible endpoint.

    The model comes from the installed package, never downloaded. Runs in the foreground (Ctrl-C stops it).
    Prints the variables that point --brain llm at it.
    """
    check_installed()
    err = Console(stderr=True, highlight=False)
    model = packaged_model(model_dir)
    server = LocalServer(model, host, port, context_tokens, threads)
    err.print("Point the LLM brain at this server (in another shell):", markup=False)
    for key, value in server.env().items():
        err.print(f"  export {key}={value}", markup=False)
    err.print("then: testcurator llm check && testcurator run --brain llm ...", markup=False)
    sys.stderr.flush()
    os.execv(sys.executable, server.command())


def check_cmd(
    llm_base_url: Annotated[Optional[str], typer.Option("--llm-base-url", help="OpenAI-compatible endpoint (else OPENAI_BASE_URL).")] = None,
    llm_model: Annotated[Optional[str], typer.Option("--llm-model", help="Model name (else TESTCURATOR_LLM_MODEL).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Ask an endpoint one structured question: mode it accepts, context window, speed.

    Exit 1 when it gives no usable answer.
    """
    from testcurator.agents.llm_client import LLMAnswerError, LLMSettings, StructuredClient
    from testcurator.agents.llm_transport import LLMTransportError
    from testcurator.prompts import load_prompt

    settings = LLMSettings.require(base_url=llm_base_url, model=llm_model)
    client = StructuredClient(settings)
    start = time.perf_counter()
    error = None
    try:
        client.context_window()
        client.call(load_prompt("check"), {"question": "Does a test named test_add_float exercise addition?"},
                    CheckAnswer, f"check-{time.time()}", max_tokens=256)
    except (LLMAnswerError, LLMTransportError) as exc:
        error = str(exc)
    status = {**client.status(), "seconds": round(time.perf_counter() - start, 2), "usage": client.usage.as_dict(),
              "ok": error is None, "error": error}
    if as_json:
        typer.echo(json.dumps(status, indent=1))
    else:
        out = Console(highlight=False, soft_wrap=True)
        out.print(f"endpoint {status['endpoint']} model {status['model']}: "
                  + ("answers" if error is None else f"no usable answer ({error})"), markup=False)
        out.print(f"structured output: {status['mode']}" + "".join(f"\n  {s}" for s in status["negotiation"]), markup=False)
        out.print(f"context window: {status['context_tokens']} tokens ({status['context_source']})", markup=False)
        u = status["usage"]
        rate = f", {u['completion_tokens'] / u['latency_s']:.1f} tokens/s" if u["latency_s"] else ""
        out.print(f"{u['calls']} call(s) in {status['seconds']} s{rate}", markup=False)
    if error is not None:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the `llm` group to ``app``."""
    llm_app = typer.Typer(name="llm", help="A local LLM server for the LLM brain, and endpoint checks.", no_args_is_help=True)
    llm_app.command("serve")(serve_cmd)
    llm_app.command("check")(check_cmd)
    app.add_typer(llm_app, name="llm")
