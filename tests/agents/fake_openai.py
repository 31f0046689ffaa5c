"""A local OpenAI-compatible server for tests: POST /v1/chat/completions answers from a
scripted queue (valid JSON, malformed JSON, cut-off answers, HTTP errors, delays, requests
held unanswered until the client times out, answers that stall half-way).

A request with ``stream: true`` is answered as the OpenAI API streams: server-sent events,
the content a few characters per chunk (``token_s`` apart), the finish reason, a usage
chunk when ``stream_options.include_usage`` asks for one, then ``[DONE]``; ``keepalive``
sends SSE comments while a delay runs, as llama-cpp-python's server pings. ``hangups``
counts answers the client hung up on while they were being sent.

``reject_formats`` makes it refuse structured-output modes the way real servers do
(llama-cpp-python: HTTP 500 "Input should be 'text' or 'json_object'"), before the script
is consulted; ``models`` is what GET /v1/models lists (context-window discovery).

Every request body is recorded, so tests assert how many calls were made and what was
sent. When the script runs out the server answers 500 with a marker, which the client
surfaces as an error: a test that makes more calls than it scripted fails.
"""

from __future__ import annotations

import json
import math
import select
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """A 200 chat completion whose message content is ``content`` (any text)."""

    content: str
    finish_reason: str = "stop"
    prompt_tokens: int = 11
    completion_tokens: int = 7
    delay: float = 0.0
    token_s: float = 0.0  # streamed: seconds between two chunks
    stall: bool = False  # streamed: send half the content, then nothing until the client hangs up
    keepalive: float = 0.0  # streamed: a comment every this many seconds while ``delay`` runs


@dataclass(frozen=True)
class Status:
    """An HTTP error status (429, 500...); ``retry-after-ms`` keeps client retries fast."""

    code: int
    delay: float = 0.0


def answer(obj: Any, **kw: Any) -> Reply:
    """A valid structured answer: ``obj`` (a dict or pydantic model) as JSON content."""
    text = obj.model_dump_json() if hasattr(obj, "model_dump_json") else json.dumps(obj)
    return Reply(text, **kw)


def malformed() -> Reply:
    return Reply('{"decisions": [ {"test": "TestFoo::test_a", "reasoning": ')


def delayed(obj: Any, seconds: float) -> Reply:
    return answer(obj, delay=seconds)


def slow(obj: Any, token_s: float, keepalive: float = 0.0, delay: float = 0.0) -> Reply:
    """A streamed answer that takes its time: ``delay`` before the first chunk (kept alive
    every ``keepalive`` s when set), then ``token_s`` between chunks."""
    return answer(obj, token_s=token_s, keepalive=keepalive, delay=delay)


def stalled(obj: Any) -> Reply:
    """A streamed answer that stops half-way and never goes on."""
    return answer(obj, stall=True)


def hung() -> Reply:
    """A request never answered: held open until the client times out and hangs up. A timeout
    this way does not race the clock (an answer merely later than the client's timeout could
    still be read by a client that a loaded machine let run late), and the client's timeout can
    be wide enough that no other request of a test ever reaches it."""
    return Reply("", delay=math.inf)


class FakeOpenAI:
    """The server; start with :meth:`start`, script with :meth:`script`."""

    def __init__(self) -> None:
        self._queue: deque[Reply | Status] = deque()
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.rejected: list[dict[str, Any]] = []  # requests refused for their response_format
        self.exhausted = 0
        self.hangups = 0  # streamed answers the client closed before their end
        self.reject_formats: dict[str, tuple[int, str]] = {}  # mode -> (status, message)
        self.models: list[dict[str, Any]] = [{"id": "fake-model", "object": "model"}]
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        self._stopped = threading.Event()  # releases requests held by hung()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._server.shutdown()
        self._server.server_close()

    def script(self, *responses: Reply | Status) -> None:
        with self._lock:
            self._queue.extend(responses)

    @property
    def pending(self) -> int:
        return len(self._queue)

    def _next(self, body: dict[str, Any]) -> Reply | Status | None:
        with self._lock:
            self.requests.append(body)
            return self._queue.popleft() if self._queue else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": fake.models})
                else:
                    self._send(404, {"detail": "Not Found"}, retry=False)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                rejected = fake.reject_formats.get(format_mode(body))
                if rejected is not None:
                    with fake._lock:
                        fake.rejected.append(body)
                    self._send(rejected[0], {"error": {"message": rejected[1], "type": "internal_server_error"}}, retry=False)
                    return
                step = fake._next(body)
                if step is None:
                    fake.exhausted += 1
                    self._send(500, {"error": {"message": "fake_openai: script exhausted"}}, retry=False)
                    return
                if step.delay == math.inf:
                    self._hold_until_the_client_hangs_up()
                    return
                if isinstance(step, Reply) and body.get("stream"):
                    self._stream(body, step)
                    return
                time.sleep(step.delay)
                if isinstance(step, Status):
                    self._send(step.code, {"error": {"message": f"scripted {step.code}", "type": "scripted"}})
                    return
                self._send(200, _completion(body.get("model", "fake"), step))

            def _hold_until_the_client_hangs_up(self) -> None:
                # Readable with no request pending: the client closed its end (its timeout).
                self.close_connection = True
                while not fake._stopped.is_set() and not select.select([self.connection], [], [], 0.05)[0]:
                    pass

            def _stream(self, body: dict[str, Any], reply: Reply) -> None:
                model = body.get("model", "fake")
                self.close_connection = True
                try:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.end_headers()
                    waited = 0.0
                    while waited < reply.delay:
                        step = min(reply.keepalive or reply.delay, reply.delay - waited)
                        time.sleep(step)
                        waited += step
                        if reply.keepalive:
                            self._event(": ping")
                    pieces = [reply.content[i:i + 4] for i in range(0, len(reply.content), 4)] or [""]
                    for n, piece in enumerate(pieces):
                        if reply.stall and n == len(pieces) // 2:
                            self._hold_until_the_client_hangs_up()
                            raise BrokenPipeError
                        self._event("data: " + json.dumps(_chunk(model, {"content": piece}, None)))
                        time.sleep(reply.token_s)
                    self._event("data: " + json.dumps(_chunk(model, {}, reply.finish_reason)))
                    if (body.get("stream_options") or {}).get("include_usage"):
                        usage = _completion(model, reply)["usage"]
                        self._event("data: " + json.dumps({**_chunk(model, {}, None), "choices": [], "usage": usage}))
                    self._event("data: [DONE]")
                except (BrokenPipeError, ConnectionResetError):
                    with fake._lock:
                        fake.hangups += 1

            def _event(self, line: str) -> None:
                self.wfile.write((line + "\n\n").encode())
                self.wfile.flush()

            def _send(self, code: int, payload: dict[str, Any], retry: bool = True) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(code)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.send_header("retry-after-ms", "5")
                    if not retry:
                        self.send_header("x-should-retry", "false")
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to answer

        return Handler


# What llama-cpp-python 0.3.36's server answers to a json_schema response_format (measured).
LLAMA_CPP_PYTHON_REJECTS = (500, "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
                                 "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}")


def format_mode(body: dict[str, Any]) -> str:
    """The structured-output mode a request asks for (agents/llm/negotiate.py's names)."""
    fmt = body.get("response_format") or {}
    if not fmt:
        return "text"
    if fmt.get("type") == "json_object":
        return "json_object_schema" if "schema" in fmt else "json_object"
    return str(fmt.get("type"))


def _chunk(model: str, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}


def _completion(model: str, reply: Reply) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "finish_reason": reply.finish_reason, "logprobs": None,
                     "message": {"role": "assistant", "content": reply.content, "refusal": None}}],
        "usage": {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                  "total_tokens": reply.prompt_tokens + reply.completion_tokens},
    }
