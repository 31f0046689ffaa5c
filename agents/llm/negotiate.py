"""Structured-output negotiation: what an OpenAI-compatible endpoint accepts, stepped down.

Servers disagree on how to ask for JSON. OpenAI, vLLM, Ollama (0.5+) and llama.cpp's own
server take a JSON-schema ``response_format``; llama-cpp-python's server answers HTTP 500
"Input should be 'text' or 'json_object'" to it but takes ``{"type": "json_object",
"schema": ...}`` (grammar-constrained); older servers know bare JSON mode only, and some
nothing at all. The ladder (:data:`OUTPUT_MODES`), best first:

==================  ======================================================================
json_schema         ``response_format: {type: json_schema, json_schema: {strict: true}}``
json_object_schema  ``{type: json_object, schema: ...}`` and the schema in the prompt
json_object         ``{type: json_object}`` and the schema in the prompt
text                no ``response_format``; the schema in the prompt, JSON cut out of the text
==================  ======================================================================

A request-shape rejection (:func:`is_shape_error`: an HTTP 400/422/500 whose message is
about the response format) moves the endpoint one rung down and the same request is sent
again; it is never an error of the run. Every mode's answer is validated by pydantic
(:func:`parse_answer`) and re-asked with the error by the client. The rung an endpoint
settled on is kept per (base URL, model) for the client's lifetime (:class:`Negotiator`).
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from testcurator.config.llm import OUTPUT_MODES
from testcurator.prompts import load_prompt

T = TypeVar("T", bound=BaseModel)

# Statuses a server uses for "I do not understand this request" (vLLM 400, FastAPI 422,
# llama-cpp-python 500 with a pydantic message). 401/403/404/408/429 never are.
_SHAPE_STATUSES = frozenset({400, 415, 422, 500, 501})
_SHAPE_WORDS = re.compile(
    r"response_format|json_schema|json_object|\bschema\b|grammar|structured output|guided|"
    r"Input should be 'text'|format.*(not supported|unsupported|invalid)|(unsupported|unknown|invalid).*format",
    re.IGNORECASE)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def is_shape_error(status: int | None, message: str) -> bool:
    """Whether an HTTP error says the *request shape* (the response format) is unsupported."""
    return status in _SHAPE_STATUSES and bool(_SHAPE_WORDS.search(message or ""))


def compact_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON Schema with ``$ref``s inlined, titles dropped, and every object
    closed (``additionalProperties: false``, all properties required): what strict
    json_schema demands, and what a grammar-constrained server turns into a grammar."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(n) for n in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return walk(copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]]))
        out = {k: walk(v) for k, v in node.items() if k != "title"}
        if out.get("type") == "object" and "properties" in out:
            out["additionalProperties"] = False
            out["required"] = list(out["properties"])
        return out

    return walk(schema)


@dataclass(frozen=True)
class Narrow:
    """One batch's answer, pinned to the batch: instead of a list of items that each name
    their request, the answer is an object with one property per requested name (in batch
    order, all required, no other), whose value is the item without its name. A
    grammar-constrained server then cannot invent a name, repeat one or leave one out;
    :func:`unkey` turns the answer back into the list the answer model declares. The rails
    still check whatever comes back (a server may ignore the schema)."""

    items: str
    key: str
    names: tuple[str, ...]


def answer_schema(model: type[BaseModel], narrow: Narrow | None = None) -> dict[str, Any]:
    """:func:`compact_schema`, keyed by the batch's names when ``narrow`` is given."""
    schema = compact_schema(model)
    if narrow is not None and narrow.names:
        item = copy.deepcopy(schema["properties"][narrow.items]["items"])
        item["properties"].pop(narrow.key, None)
        item["required"] = [r for r in item["required"] if r != narrow.key]
        names = list(dict.fromkeys(narrow.names))
        # One definition, referenced per name: the schema (and a prompt that shows it) grows by
        # a name per request, not by a copy of the item.
        schema["$defs"] = {"item": item}
        schema["properties"][narrow.items] = {"type": "object", "properties": {n: {"$ref": "#/$defs/item"} for n in names},
                                              "required": names, "additionalProperties": False}
    return schema


def unkey(data: Any, narrow: Narrow | None) -> Any:
    """An answer in the keyed form of :func:`answer_schema` as the answer model's list form
    (anything else unchanged: validation reports what is wrong with it)."""
    if narrow is None or not isinstance(data, dict) or not isinstance(data.get(narrow.items), dict):
        return data
    listed = [{narrow.key: name, **value} if isinstance(value, dict) else value for name, value in data[narrow.items].items()]
    return {**data, narrow.items: listed}


def keyed(data: Any, narrow: Narrow | None) -> Any:
    """The inverse of :func:`unkey`: a list-form answer in the keyed form (for re-asks)."""
    if narrow is None or not isinstance(data, dict) or not isinstance(data.get(narrow.items), list):
        return data
    out: dict[str, Any] = {}
    for item in data[narrow.items]:
        if isinstance(item, dict) and isinstance(item.get(narrow.key), str):
            out[item[narrow.key]] = {k: v for k, v in item.items() if k != narrow.key}
    return {**data, narrow.items: out}


def response_format(mode: str, model: type[BaseModel], narrow: Narrow | None = None) -> dict[str, Any] | None:
    """The ``response_format`` request field for ``mode`` (None: leave it out)."""
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": model.__name__, "strict": True,
                                                         "schema": answer_schema(model, narrow)}}
    if mode == "json_object_schema":
        return {"type": "json_object", "schema": answer_schema(model, narrow)}
    if mode == "json_object":
        return {"type": "json_object"}
    return None


def with_schema_in_prompt(mode: str, messages: list[dict[str, str]], model: type[BaseModel],
                          narrow: Narrow | None = None) -> list[dict[str, str]]:
    """``messages`` with the answer schema appended to the system message (every mode but
    json_schema, where the server enforces it)."""
    if mode == "json_schema" or not messages:
        return messages
    schema = json.dumps(answer_schema(model, narrow), separators=(",", ":"))
    hint = load_prompt("schema").render({"schema": schema})[1]["content"]
    first, rest = messages[0], messages[1:]
    if first["role"] != "system":
        return [{"role": "system", "content": hint}, *messages]
    return [{"role": "system", "content": f"{first['content']}\n\n{hint}"}, *rest]


def extract_json(text: str) -> str:
    """The JSON object in a model's text: the whole text, a fenced block, or the span from
    the first ``{`` to the last ``}`` (plain-text mode answers often wrap it in prose)."""
    stripped = text.strip()
    if stripped.startswith("{"):
        return stripped
    fenced = _FENCE.search(stripped)
    if fenced and fenced.group(1).strip().startswith("{"):
        return fenced.group(1).strip()
    start, end = stripped.find("{"), stripped.rfind("}")
    return stripped[start:end + 1] if 0 <= start < end else stripped


def parse_answer(mode: str, content: str, model: type[T], narrow: Narrow | None = None) -> T:
    """Validate an answer; raises pydantic's ValidationError (the client re-asks with it)."""
    text = content if mode != "text" else extract_json(content)
    if narrow is not None:
        try:
            return model.model_validate(unkey(json.loads(text), narrow))
        except ValueError as exc:
            if isinstance(exc, ValidationError):
                raise
    return model.model_validate_json(text)  # not JSON: pydantic says so, the usual way


def complete_items(content: str) -> str | None:
    """The JSON of an answer cut off at the output-token cap, closed after its last complete
    item (``{"decisions": [{...}, {...}, {"te`` -> ``{"decisions": [{...}, {...}]}``), or None
    when no item is complete. On a slow endpoint an answer that ran into the cap cost minutes:
    its complete items are kept, and only the rest is asked again."""
    start = content.find("{")
    if start < 0:
        return None
    stack: list[str] = []
    in_string = escaped = False
    cut: tuple[int, str] | None = None
    for index, char in enumerate(content[start:], start):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]":
            if not stack or stack.pop() != char:
                return None
            if len(stack) == 2:  # an item of the top-level object's list (or keyed object) just closed
                cut = (index + 1, "".join(reversed(stack)))
    if cut is None:
        return None
    return content[start:cut[0]] + cut[1]


@dataclass
class Negotiator:
    """The rung each endpoint settled on, and how it got there (for the report)."""

    start: str = OUTPUT_MODES[0]
    _modes: dict[str, str] = field(default_factory=dict)
    steps: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.start not in OUTPUT_MODES:
            raise ValueError(f"unknown structured-output mode {self.start!r} (expected one of {', '.join(OUTPUT_MODES)})")

    def mode(self, endpoint: str) -> str:
        with self._lock:
            return self._modes.get(endpoint, self.start)

    def step_down(self, endpoint: str, rejected: str, why: str) -> str | None:
        """Record that ``endpoint`` rejected ``rejected``; the next rung, or None at the bottom.
        Idempotent under concurrency: a rung already left is not left twice."""
        with self._lock:
            current = self._modes.get(endpoint, self.start)
            if current != rejected:
                return current  # another thread stepped down already
            index = OUTPUT_MODES.index(current)
            if index + 1 >= len(OUTPUT_MODES):
                return None
            nxt = OUTPUT_MODES[index + 1]
            self._modes[endpoint] = nxt
            self.steps.append(f"{rejected} -> {nxt}: {one_line(why, 160)}")
            return nxt

    def settled(self) -> Mapping[str, str]:
        with self._lock:
            return dict(self._modes)


def one_line(text: str, limit: int = 200) -> str:
    """``text`` on one line, at most ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
