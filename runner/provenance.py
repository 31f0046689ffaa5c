"""What a CI run adds to the manifest: the three moving targets and the dispatch payload.

Seed 003 (Challenge 8): to reproduce or bisect a run weeks later, keep the backend SHA,
the PyTorch SHA, the test tree's SHA, the dispatch payload that started the run, and the
runtime environment. The generated workflow (``testcurator ci github``) passes them as
environment variables; outside CI they are simply absent (the manifest still records
the upstream checkout's revision, torch's own git version, Python, OS and CPU).

``TESTCURATOR_DISPATCH_PAYLOAD`` is a JSON file (or inline JSON); a value that is neither
is bad input rather than something to drop silently.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testcurator.errors import BadInputError

SHA_ENV = {"backend_sha": "TESTCURATOR_BACKEND_SHA", "torch_sha": "TESTCURATOR_TORCH_SHA",
           "test_tree_sha": "TESTCURATOR_TEST_TREE_SHA"}
PAYLOAD_ENV = "TESTCURATOR_DISPATCH_PAYLOAD"
# GitHub Actions' own variables that say where and what ran.
RUNNER_ENV = {"workflow": "GITHUB_WORKFLOW", "run_id": "GITHUB_RUN_ID", "run_attempt": "GITHUB_RUN_ATTEMPT",
              "job": "GITHUB_JOB", "event": "GITHUB_EVENT_NAME", "repository": "GITHUB_REPOSITORY",
              "runner_name": "RUNNER_NAME", "runner_os": "RUNNER_OS", "runner_arch": "RUNNER_ARCH"}


def _payload(value: str) -> Any:
    path = Path(value)
    try:
        text = path.read_text(encoding="utf-8") if path.is_file() else value
        return json.loads(text)
    except (OSError, json.JSONDecodeError) as exc:
        raise BadInputError(f"{PAYLOAD_ENV}={value!r}: not a JSON file or JSON text ({exc})") from exc


def ci_provenance(env: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The CI section of the manifest, or None when nothing says this is a CI run."""
    env = os.environ if env is None else env
    out: dict[str, Any] = {key: env[name] for key, name in SHA_ENV.items() if env.get(name)}
    if env.get(PAYLOAD_ENV):
        out["dispatch"] = _payload(env[PAYLOAD_ENV])
    runner = {key: env[name] for key, name in RUNNER_ENV.items() if env.get(name)}
    if runner:
        out["runner"] = runner
    return out or None
