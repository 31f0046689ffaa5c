"""`testcurator ci github`: a GitHub Actions workflow in seed 003's shape.

The workflow is the template ``templates/github-workflow.yml`` (read it: it is the
documentation of the shape) with the backend's values filled in. Placeholders are
``<<name>>`` (replaced by a JSON literal, which is also a valid YAML flow scalar, so no
value can break the document) and ``<<script:NAME>>`` alone on a line (replaced by the
shell script ``templates/NAME``, indented like the placeholder). Every value that comes
from an event reaches the shell through ``env:``; the tests check the result against
GitHub's workflow schema and with zizmor.

Seed 000's ladder maps onto the triggers: a relay dispatch (one PR) runs tier L1, the
nightly schedule L2, and workflow_dispatch whichever tier is asked (L3: on demand). Config
labels narrow a trigger to the files carrying them (``exec --labels``): the seed's
``labels: [trunk]`` is what a per-PR relay dispatch runs, a nightly may add ``nightly``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import PurePosixPath
from typing import Any

from testcurator.config.profile import BackendProfile
from testcurator.errors import BadInputError

# Actions the workflow uses, pinned to the commit of a release (a tag can be moved; zizmor's
# unpinned-uses). Upload v4+ and download v4+ share one artifact backend.
ACTIONS = {
    "checkout": "3d3c42e5aac5ba805825da76410c181273ba90b1  # v7.0.1",
    "upload_artifact": "bbbca2ddaa5d8feaa63e36b76fdaad77386f024f  # v7.0.0",
    "download_artifact": "3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c  # v8.0.1",
}
_LABELS = re.compile(r"^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*$")
_PROFILE = re.compile(r"^[A-Za-z0-9_./-]+$")
_VALUE = re.compile(r"<<([a-z_]+)>>")
_SCRIPT = re.compile(r"^(?P<indent>[ ]*)<<script:(?P<name>[a-z_.-]+)>>$", re.M)


@dataclass(frozen=True)
class WorkflowOptions:
    """What ``ci github`` asks for; defaults follow the seed (merged PRs to main/release)."""

    shards: int
    config_dir: str = "configs"
    profile_path: str = "backend.yaml"  # the backend profile, relative to the backend repository's root
    runs_on: tuple[str, ...] = ()  # default: [self-hosted, <device>]
    build_runs_on: tuple[str, ...] = ("ubuntu-latest",)
    event_type: str = "pytorch-pr"
    branches: str = "main|release/.+"
    label: str = "Merged"
    label_wait_s: int = 300
    cron: str = "0 4 * * *"
    torch_repo: str = "pytorch/pytorch"
    testcurator_requirement: str = "testcurator"
    torch_build: str = "pip wheel --no-deps --no-build-isolation -w ../dist ."
    backend_build: str = "pip wheel --no-deps -w ../dist ."
    dispatch_tier: str = "L1"
    schedule_tier: str = "L2"
    dispatch_labels: str = ""  # config labels a relay dispatch runs (exec --labels), e.g. "trunk"
    schedule_labels: str = ""  # ... and the nightly schedule, e.g. "trunk,nightly"
    job_timeout_minutes: int = 120
    exec_args: tuple[str, ...] = field(default_factory=tuple)


def _template(name: str) -> str:
    return resources.files("testcurator.pipelines").joinpath("templates", name).read_text(encoding="utf-8")


def _values(profile: BackendProfile, opts: WorkflowOptions) -> dict[str, Any]:
    device = profile.device.torch_name
    return {
        "backend_name": profile.name, "device": device, "backend_profile": opts.profile_path,
        "shards": list(range(1, opts.shards + 1)), "shards_count": str(opts.shards),
        "runs_on": list(opts.runs_on) or ["self-hosted", device], "build_runs_on": list(opts.build_runs_on),
        "config_dir": opts.config_dir, "event_type": opts.event_type, "branches": opts.branches,
        "label": opts.label, "label_wait_s": str(opts.label_wait_s), "cron": opts.cron, "torch_repo": opts.torch_repo,
        "testcurator_requirement": opts.testcurator_requirement, "torch_build": opts.torch_build,
        "backend_build": opts.backend_build, "dispatch_tier": opts.dispatch_tier, "schedule_tier": opts.schedule_tier,
        "dispatch_labels": opts.dispatch_labels, "schedule_labels": opts.schedule_labels,
        "job_timeout_minutes": opts.job_timeout_minutes, **ACTIONS,
    }


def _check(opts: WorkflowOptions) -> None:
    profile = PurePosixPath(opts.profile_path)
    if profile.is_absolute() or ".." in profile.parts or not _PROFILE.match(opts.profile_path):
        raise BadInputError(f"backend profile {opts.profile_path!r}: expected a path inside the backend repository "
                            "(relative, no '..', letters, digits, - _ . /)")
    if opts.shards < 1:
        raise BadInputError(f"--shards {opts.shards}: need at least 1")
    for tier in (opts.dispatch_tier, opts.schedule_tier):
        if tier not in ("L1", "L2", "L3"):
            raise BadInputError(f"tier {tier!r}: expected L1, L2 or L3")
    for labels in (opts.dispatch_labels, opts.schedule_labels):
        if labels and not _LABELS.match(labels):
            raise BadInputError(f"labels {labels!r}: expected names separated by commas (letters, digits, - _ .)")
    try:
        re.compile(opts.branches)
    except re.error as exc:
        raise BadInputError(f"--branches {opts.branches!r}: not a regular expression ({exc})") from exc


def _exec_args(args: tuple[str, ...]) -> str:
    # Extra exec options are baked in by whoever generates the workflow (not from events);
    # still quoted for the shell, one word each.
    import shlex

    return " ".join(shlex.quote(a) for a in args)


def render_github_workflow(profile: BackendProfile, opts: WorkflowOptions) -> str:
    """The workflow YAML text."""
    _check(opts)
    values = _values(profile, opts)

    def script(match: re.Match[str]) -> str:
        body = _template(match.group("name")).replace("<<exec_args>>", _exec_args(opts.exec_args))
        indent = match.group("indent")
        return "\n".join(indent + line if line else "" for line in body.rstrip("\n").split("\n"))

    text = _SCRIPT.sub(script, _template("github-workflow.yml"))

    def value(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"template placeholder <<{key}>> has no value")
        item = values[key]
        # After "@": the bare commit and its comment (uses: owner/repo@SHA  # vX.Y.Z).
        return item if key in ACTIONS else json.dumps(item)

    return _VALUE.sub(value, text)
