"""`testcurator profile init`: draft a backend profile (backend.yaml) by probing the device.

A hand-written profile says what a backend's authors believe it supports; this one says
what ran. The probe (runner/probe/profile.py) imports the backend in worker processes and
runs a check per dtype and hook, surviving checks that crash or hang; the draft
(config/profile_write.py) lists what passed and names every other check, with its error,
in a comment. The human then writes what no probe can: preferences, sources, docs.
"""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.console import Console

from testcurator.cli.commands import command, invocation, new_group
from testcurator.cli.options import BackendModuleReq, OutTarget, PythonPath, Timeout
from testcurator.config.profile_write import CheckOutcome, ProfileDraft, render_profile
from testcurator.errors import BadInputError, MissingPathError
from testcurator.files import atomic_write_text

app = new_group("profile", "The backend profile (backend.yaml): who the backend is and what it supports.")
DEFAULT_OUT = Path("backend.yaml")
SHOWN_ERROR = 100  # characters of a check's error in the progress line (the profile has the rest)


def _refuse_existing(out: Path) -> None:
    if out.exists() or out.is_symlink():
        raise BadInputError(f"{out} already exists: profile init does not overwrite a profile "
                            "(move it away, or name another --out)")


def _relative(paths: list[Path], out: Path) -> list[str]:
    """``python_path`` as the profile reads it: relative to the profile's folder, so the file
    can move with the backend's repository; absolute where the two share no folder but the
    root (``../../../opt/x`` would only pretend to be portable)."""
    here = out.parent
    return [Path(os.path.relpath(p, here)).as_posix() if Path(os.path.commonpath([p, here])) != Path(p.anchor)
            else p.as_posix() for p in paths]


def _progress(err: Console, outcome: CheckOutcome) -> None:
    why = outcome.error if len(outcome.error) <= SHOWN_ERROR else outcome.error[:SHOWN_ERROR] + " ..."
    err.print(f"  {outcome.kind:<5} {outcome.name:<14} {outcome.status:<7} {outcome.seconds:7.2f} s"
              + (f"  {why}" if outcome.status != "pass" else ""), markup=False)


def _summary(draft: ProfileDraft, out: Path, seconds: float, workers: int) -> list[str]:
    lost = [o for o in draft.outcomes if o.status in ("crash", "timeout")]
    return [
        f"wrote {out}: device {draft.device!r}, {len(draft.outcomes)} checks in {seconds:.1f} s "
        f"({workers} worker process{'es' if workers != 1 else ''})",
        f"  hooks: {', '.join(draft.passed('hook')) or 'none passed'}",
        f"  supported_dtypes: {', '.join(draft.passed('dtype')) or 'none passed'}",
        f"  not listed: {', '.join(o.name for o in draft.not_passed('hook') + draft.not_passed('dtype')) or 'none'}",
        *([f"  crashed or timed out: {', '.join(f'{o.name} ({o.status})' for o in lost)}"] if lost else []),
        "  next: review the comments in the file, then write its preferences (and source_paths, docs)",
    ]


@command(app, "init")
def init_cmd(
    backend_module: BackendModuleReq,
    python_path: PythonPath = None,
    out: OutTarget = DEFAULT_OUT,
    timeout: Timeout = 300,
) -> None:
    """Draft a backend profile by probing the device: import the backend in a subprocess, find
    the device it registers, and run a check per dtype and per hook on it, compared with CPU.

    The profile lists the hooks and dtypes whose check passed; a comment above each list names
    every check that failed, crashed or timed out, with its error. A check that crashes or hangs
    the process is recorded and the others go on in a new one. Hooks without a check (inductor,
    distributed, export, onnx, profiler) are named as not probed. An existing --out is never
    replaced.
    """
    from testcurator.runner.probe.profile import ProfileProbeSpec, probe_profile

    out = Path(os.path.abspath(out or DEFAULT_OUT))
    _refuse_existing(out)
    paths = [Path(p) for p in python_path or []]
    for path in paths:
        if not path.is_dir():
            raise MissingPathError(path, "--python-path folder")
    if not backend_module.strip() or any(c.isspace() for c in backend_module):
        raise BadInputError(f"--backend-module {backend_module!r} is not a module name (MODULE or MODULE:FUNCTION)")
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    err.print(f"profile init: importing {backend_module} in a probe process ...", markup=False)
    spec = ProfileProbeSpec(backend_module, check_timeout=timeout, python_path=paths, cwd=Path.cwd())
    probe = probe_profile(spec, say=lambda outcome: _progress(err, outcome))
    draft = ProfileDraft(device=probe.device, backend_module=backend_module, outcomes=probe.outcomes,
                         python_path=_relative(paths, out), torch_version=probe.torch_version, command=invocation())
    text = render_profile(draft)
    _refuse_existing(out)  # probing took a while: someone may have written it meanwhile
    atomic_write_text(out, text)
    console = Console(highlight=False, soft_wrap=True)
    for line in _summary(draft, out, probe.seconds, probe.workers):
        console.print(line, markup=False)


def register(root: typer.Typer) -> None:
    """Add the `profile` group to ``root``."""
    root.add_typer(app, name="profile")
