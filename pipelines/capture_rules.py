"""What a run's CPU op capture need not run: what the backend profile already rules out.

The config skips an instance whose dtype the profile does not declare, and the bucket rules
skip a test that needs a hook the backend does not have (agents/offline/bucket.py,
``bucket_needs``): running either on CPU buys nothing. This builds the
:class:`~testcurator.memory.capture_select.RuleOut` the memory stage selects with: the
declared ``supported_dtypes``, the hooks as the bucket rules read them (the profile's, with
the preferences' hook wishes), and the tests whose decorators, source and summary already
show such a hook, read with the bucket rules' own feature patterns, after the index is built
(the capture runs after it). The ATen ops a test calls can show more needs; those are known
only once it has run, so a test is ruled out by what its text shows alone. Not a plain
test that names no device: it runs on CPU on the backend's CI too, so whether it passes on
CPU decides it, whatever hooks the backend has.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from testcurator.agents.offline.rules import effective_hooks, needed_features, parse_preferences
from testcurator.config.profile import HOOKS
from testcurator.memory.capture_select import RULED_OUT, RuleOut

if TYPE_CHECKING:
    from testcurator.agents.brain import BackendContext
    from testcurator.config.profile import BackendProfile


class HookNeeds:
    """``(file, generic) -> reason``: the first hook the test's text shows it needs and the
    backend lacks (None: none), read per file from the index on first use."""

    def __init__(self, torch_root: Path, state_dir: Path, backend: BackendContext, hooks: frozenset[str]) -> None:
        self.torch_root, self.state_dir, self.backend, self.hooks = torch_root, state_dir, backend, hooks
        self._files: dict[str, dict[str, str]] = {}

    def __call__(self, file: str, generic: str) -> str | None:
        if file not in self._files:
            self._files[file] = self._read(file)
        return self._files[file].get(generic)

    def _read(self, rel: str) -> dict[str, str]:
        from testcurator.agents.bucket import requests_for_file
        from testcurator.agents.offline.bucket import _decos, _needs_text  # the bucket rules' own reading
        from testcurator.agents.offline.facts import names_no_device
        from testcurator.memory.api import Memory

        with Memory.open(self.state_dir) as memory:
            requests = requests_for_file(self.torch_root, memory, rel, {}, {})
        out = {}
        for req in requests:
            # complex: a dtype-parametrized test's complex dtypes are the dtype rule's (RuleOut.dtypes)
            needs = needed_features(req.test, _needs_text(req, _decos(req.decorators), self.backend), (),
                                    dtypes_listed=True)
            lacking = [need for need in needs if need in HOOKS and need not in self.hooks]
            # A plain test that names no device runs on CPU on the backend's CI too: whether it
            # passes there decides it (bucket_needs), so it is captured.
            if lacking and not names_no_device(req):
                out[req.test] = f"{RULED_OUT}: the test needs the {lacking[0]} hook"
        return out


def capture_rule_out(profile: BackendProfile, backend: BackendContext, torch_root: Path,
                     state_dir: Path) -> RuleOut:
    """What the profile rules out for a run over ``torch_root`` whose index is in ``state_dir``."""
    declared = profile.supported_dtypes
    hooks = effective_hooks(backend, parse_preferences(profile.preferences))
    return RuleOut(None if declared is None else frozenset(d.name for d in declared), hooks,
                   HookNeeds(torch_root, state_dir, backend, hooks) if hooks is not None else None)
