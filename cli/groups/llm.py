"""`testcurator llm serve|check`: a local model server for the LLM brain, and a probe of any endpoint."""

from __future__ import annotations

import json
import os
import sys
import time
import typer
from pydantic import BaseModel
from rich.console import Console

from testcurator.cli.commands import command, new_group
from testcurator.cli.options import (ContextTokens, Format, Host, JsonDeprecated, LlmBaseUrl, LlmModel, ModelDir, Port, Threads,
                                     wants_json)
from testcurator.agents.llm.local import DEFAULT_CONTEXT, DEFAULT_PORT, DEFAULT_THREADS, LocalServer, check_installed, packaged_model


class CheckAnswer(BaseModel):
    reasoning: str
    answer: bool


def serve_cmd(
    port: Port = DEFAULT_PORT,
    host: Host = "127.0.0.1",
    context_tokens: ContextTokens = DEFAULT_CONTEXT,
    threads: Threads = DEFAULT_THREADS,
    model_dir: ModelDir = None,
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
    llm_base_url: LlmBaseUrl = None,
    llm_model: LlmModel = None,
    fmt: Format = "text",
    as_json: JsonDeprecated = False,
) -> None:
    """Ask an endpoint one structured question: mode it accepts, context window, speed.

    Exit 1 when it gives no usable answer.
    """
    as_json = wants_json(fmt, as_json)
    from testcurator.agents.llm.client import LLMAnswerError, StructuredClient
    from testcurator.config.llm import LLMSettings
    from testcurator.agents.llm.transport import LLMTransportError
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
        rates = [f"{status[k]} tokens/s {what}" for k, what in (("tokens_per_s", "generated"),
                                                               ("prompt_tokens_per_s", "of prompt read")) if status[k]]
        out.print(f"{u['calls']} call(s) in {status['seconds']} s" + (f": {', '.join(rates)}" if rates else ""), markup=False)
    if error is not None:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the `llm` group to ``app``."""
    llm_app = new_group("llm", "A local LLM server for the LLM brain, and endpoint checks.")
    command(llm_app, "serve")(serve_cmd)
    command(llm_app, "check")(check_cmd)
    app.add_typer(llm_app, name="llm")
