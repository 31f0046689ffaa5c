"""Tonight's run identity, taken when the run starts and completed when it ends.

The identity (memory/history.py :class:`RunIdentity`) is what a change of outcome is
explained by. It is taken before anything runs (``identity.json`` in the run folder, so a
resumed run keeps it): the backend digest of the environment the tests will run in, the
torch version, the upstream revision and the digest of the standing configs. The digest of
the configs the run ends with is added when it records itself.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from testcurator.config.profile import load_profile
from testcurator.installed import torch_version
from testcurator.memory.api import Memory
from testcurator.memory.history import RunIdentity
from testcurator.memory.run_identity import backend_digest, config_digest
from testcurator.pipelines.context import RunContext
from testcurator.pipelines.store import RunStore
from testcurator.vocab import TestKey

IDENTITY = "identity.json"
# The run's key (pipelines/nights/uptodate.py), written when the run starts: it holds the
# backend digest, torch and the upstream revision already, which take() need not compute again.
RUN_KEY = "run_key.json"


def upstream_revision(torch_root: Path) -> str:
    """The upstream tree's git commit, else a digest of its test sources.

    Two runs whose revisions are equal ran the same tree: local changes under a checkout add
    ``+dirty`` and a digest of the diff; a folder of a larger repository is named by its own
    tree id (commits elsewhere do not change it); a tree outside git by a digest of the
    Python files under its ``test/`` (and its version.txt, when it has one)."""
    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", "-C", str(torch_root), *args], capture_output=True, text=True, timeout=60,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    head = git("rev-parse", "HEAD")
    if head:
        diff = git("diff", "HEAD", "--", ".") if git("status", "--porcelain", "--untracked-files=no", "--", ".") else ""
        dirty = f"+dirty:{hashlib.sha256((diff or '').encode()).hexdigest()[:12]}" if diff else ""
        top = git("rev-parse", "--show-toplevel")
        if top is None or Path(top).resolve() == torch_root.resolve():
            return head + dirty
        # A folder of a larger repository: its own tree id changes only when the folder does.
        tree = git("rev-parse", "HEAD:./")
        if tree is None:  # not committed yet
            return f"{head}{dirty} (of the repository at {top})"
        return f"tree {tree}{dirty} (a folder of the repository at {top})"
    version = torch_root / "version.txt"
    named = f"version.txt {version.read_text(encoding='utf-8').strip()}, " if version.is_file() else ""
    return f"{named}test tree {_tree_digest(torch_root)} (not a git checkout)"


def _tree_digest(torch_root: Path) -> str:
    """16 hex digits over the Python files under ``test/`` (by relative path and content)."""
    base = torch_root / "test" if (torch_root / "test").is_dir() else torch_root
    digest = hashlib.sha256()
    for path in sorted(base.rglob("*.py")):
        if "__pycache__" not in path.parts and path.is_file():
            digest.update(path.relative_to(base).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def take(ctx: RunContext, store: RunStore, standing: Path | None) -> RunIdentity:
    """Tonight's identity, written once per run folder (a resumed run reads it back)."""
    if store.has(IDENTITY):
        return RunIdentity.from_json(store.read_json(IDENTITY))
    key = store.read_json(RUN_KEY) or identity_inputs(ctx)
    identity = RunIdentity(
        run_id=store.root.name, kind="upgrade" if ctx.delta else "nightly",
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"), out_dir=str(ctx.out_dir),
        backend=ctx.profile.name, torch_version=key["torch"], upstream_revision=key["upstream"],
        backend_digest=key["backend"], config_digest="", standing_digest=config_digest(standing) if standing else "")
    store.write_json(IDENTITY, identity.to_json())
    return identity


def identity_inputs(ctx: RunContext) -> dict[str, str]:
    """The backend digest, torch's version and the upstream revision: the inputs a change of
    outcome is explained by (a run's key starts with them, pipelines/nights/uptodate.py)."""
    _, paths = load_profile(ctx.profile_path)
    return {"backend": backend_digest(ctx.profile, ctx.profile_path, paths["source_paths"]),
            "torch": torch_version(), "upstream": upstream_revision(ctx.torch_root)}


def read(store: RunStore) -> RunIdentity | None:
    data = store.read_json(IDENTITY)
    return RunIdentity.from_json(data) if data else None


def finished(identity: RunIdentity, ctx: RunContext, code: int) -> RunIdentity:
    """The identity with the configs the run ended with, and its exit code."""
    return RunIdentity.from_json({**identity.to_json(), "config_digest": config_digest(ctx.configs_dir),
                                  "exit_code": code})


def test_hashes(ctx: RunContext, files: Sequence[str]) -> dict[TestKey, str]:
    """The source hash of every test of ``files`` in memory (tree-sitter's content hash)."""
    wanted = set(files)
    with Memory.open(ctx.state_dir) as memory:
        return {TestKey.of(path, generic): digest for path, generic, digest, _ in memory.store.test_hashes()
                if path in wanted}
