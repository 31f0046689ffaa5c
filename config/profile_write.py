"""A backend profile drafted from probing (``testcurator profile init``), as commented YAML.

What the probe found goes into the fields the pipeline reads (``hooks``,
``supported_dtypes``); what it could not confirm goes into comments above them, one line per
check with its error, so the human finishing the file sees why a hook is missing and can
decide whether the check or the backend is wrong. Hooks no check exists for are named as not
probed rather than guessed. The text is validated against :class:`BackendProfile` before it
is returned: a draft that the loader would reject is a bug here, not the user's problem.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import yaml

from testcurator.config.profile import HOOKS, PROFILE_SCHEMA_VERSION, BackendProfile

#: What a check can come to: it passed, raised, killed its process, or ran past the limit.
CHECK_STATUSES = ("pass", "fail", "crash", "timeout")


@dataclass(frozen=True)
class CheckOutcome:
    """One probe check: ``kind`` is ``dtype`` or ``hook``, ``name`` the dtype or hook."""

    kind: str
    name: str
    status: str
    error: str = ""
    seconds: float = 0.0

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.name}"


@dataclass(frozen=True)
class ProfileDraft:
    """Everything a drafted profile says: who the backend is and what its checks found."""

    device: str
    backend_module: str
    outcomes: Sequence[CheckOutcome]
    python_path: Sequence[str] = field(default_factory=tuple)  # relative to the profile's folder
    torch_version: str = ""
    command: str = ""

    def passed(self, kind: str) -> list[str]:
        return [o.name for o in self.outcomes if o.kind == kind and o.status == "pass"]

    def not_passed(self, kind: str) -> list[CheckOutcome]:
        return [o for o in self.outcomes if o.kind == kind and o.status != "pass"]


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "y", "n", "null"}


def _quote(text: str) -> str:
    """``text`` as a YAML scalar: plain when it is a simple name, else double-quoted (JSON's
    string syntax is a subset of YAML's, so json.dumps escapes it right)."""
    if _PLAIN.fullmatch(text) and text.lower() not in _YAML_WORDS:
        return text
    return json.dumps(text)


def _why(outcome: CheckOutcome) -> str:
    """One comment line's worth: newlines folded, so a message cannot end the comment."""
    return " ".join(outcome.error.split()) or outcome.status


def _failures(outcomes: Sequence[CheckOutcome]) -> list[str]:
    return [f"# {o.name}: not listed: {_why(o)}" for o in outcomes]


def render_profile(draft: ProfileDraft) -> str:
    """The commented ``backend.yaml`` for ``draft``; raises ValueError if it would not load."""
    hooks = [h for h in HOOKS if h in draft.passed("hook")]
    probed = {o.name for o in draft.outcomes if o.kind == "hook"}
    not_probed = [h for h in HOOKS if h not in probed]
    dtypes = draft.passed("dtype")
    counts = {s: sum(o.status == s for o in draft.outcomes) for s in CHECK_STATUSES}
    lines = [
        f"# Backend profile of {draft.device} (schema: testcurator.config.profile), drafted by probing the device:",
        f"#   {' '.join(draft.command.split()) or 'testcurator profile init'}",
        f"# on torch {draft.torch_version or '(unknown)'}: {counts['pass']} check(s) passed, {counts['fail']} failed, "
        f"{counts['crash']} crashed, {counts['timeout']} timed out.",
        "# Listed below is what ran on the device and matched CPU. Review it, then finish the TODOs.",
        f"schema_version: {PROFILE_SCHEMA_VERSION}",
        f"name: {_quote(draft.device)}",
        f"device: {{kind: privateuse1, name: {_quote(draft.device)}}}",
        "# Imported (and :FUNCTION called) before tests are collected: registers the device.",
        f"backend_module: {_quote(draft.backend_module)}",
    ]
    if draft.python_path:
        lines += ["# Folders that make backend_module importable, relative to this file.",
                  f"python_path: [{', '.join(_quote(p) for p in draft.python_path)}]"]
    lines += ["# Hooks: each was checked on the device with a few calls of its kind, compared with CPU."]
    lines += _failures(draft.not_passed("hook"))
    if not_probed:
        lines.append(f"# Not probed (add them yourself if the backend implements them): {', '.join(not_probed)}")
    lines.append(f"hooks: [{', '.join(hooks)}]")
    lines.append("# Dtypes: each was allocated on the device, x + x (bool: x | x) computed there and compared with CPU.")
    lines += _failures(draft.not_passed("dtype"))
    lines.append("supported_dtypes:" + ("" if dtypes else " []"))
    lines += [f"  - {{name: {d}}}" for d in dtypes]
    lines += [
        "# TODO: write what matters to you, in plain language (the scope stage reads it), e.g.",
        '#   - "Eager operator correctness matters most; ignore sparse for now."',
        "preferences: []",
        "# TODO (optional): the backend's sources and docs, relative to this file, so the bucket stage",
        "# can find the ops it registers: source_paths: [csrc/, mybackend/] and docs: [README.md]",
    ]
    text = "\n".join(lines) + "\n"
    BackendProfile.model_validate(yaml.safe_load(text))  # pydantic's ValidationError is a ValueError
    return text
