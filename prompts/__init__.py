"""Prompt files, loaded through one function (DEVELOPERS.md: no prompt strings in code).

A prompt file is Markdown in this package (``prompts/<name>.md``). Layout:

* an optional leading HTML comment documenting the prompt and its fields (not sent);
* ``<!-- system -->`` then the system message;
* ``<!-- user -->`` then the user message.

Both messages are :class:`string.Template` texts (``$field`` / ``${field}``; ``$$`` is a
literal dollar). ``string.Template`` rather than ``str.format`` because the prompts show
JSON, whose braces ``str.format`` would take for fields. Non-string values are rendered
as indented JSON. The prompt's hash covers the whole file, so editing a prompt changes
every cache key that depends on it.

Layer: beside config, just above the core. May import only the core modules.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from testcurator.errors import CuratorError

_SECTION_RE = re.compile(r"^<!--\s*(system|user)\s*-->\s*$", re.MULTILINE)
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")


class PromptError(CuratorError):
    """A prompt is unknown, malformed, or was rendered with missing fields."""

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        super().__init__(f"prompt {name!r}: {message}")


@dataclass(frozen=True)
class Prompt:
    """One prompt file: its name, full text and the sha256 of that text."""

    name: str
    text: str
    hash: str

    @property
    def system(self) -> str:
        return self._sections()["system"]

    @property
    def user(self) -> str:
        return self._sections()["user"]

    @property
    def fields(self) -> frozenset[str]:
        """Every ``$field`` the two messages use."""
        found: set[str] = set()
        for part in (self.system, self.user):
            found.update(string.Template(part).get_identifiers())
        return frozenset(found)

    def render(self, variables: Mapping[str, Any]) -> list[dict[str, str]]:
        """The chat messages (system, user) with every field filled."""
        missing = sorted(self.fields - set(variables))
        if missing:
            raise PromptError(self.name, f"missing fields: {', '.join(missing)}")
        values = {key: _as_text(value) for key, value in variables.items()}
        return [
            {"role": "system", "content": string.Template(self.system).substitute(values)},
            {"role": "user", "content": string.Template(self.user).substitute(values)},
        ]

    def _sections(self) -> dict[str, str]:
        parts = _SECTION_RE.split(self.text)
        # split() with one group gives [preamble, tag, body, tag, body].
        sections = {parts[i]: parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}
        if set(sections) != {"system", "user"}:
            raise PromptError(self.name, "needs one '<!-- system -->' and one '<!-- user -->' section")
        return sections


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=1, sort_keys=True, default=str)


def load_prompt(name: str) -> Prompt:
    """Load ``prompts/<name>.md`` from the installed package (works from a wheel too)."""
    if not _NAME_RE.match(name):
        raise PromptError(name, "a prompt name is lowercase letters, digits and '_'")
    resource = resources.files(__name__).joinpath(f"{name}.md")
    if not resource.is_file():
        raise PromptError(name, f"no such prompt (known: {', '.join(available_prompts())})")
    text = resource.read_text(encoding="utf-8")
    prompt = Prompt(name=name, text=text, hash=hashlib.sha256(text.encode("utf-8")).hexdigest())
    prompt._sections()  # malformed files fail at load, not at the first call
    return prompt


def available_prompts() -> list[str]:
    """Names of every prompt file shipped in this package."""
    return sorted(p.name[:-3] for p in resources.files(__name__).iterdir() if p.name.endswith(".md"))
