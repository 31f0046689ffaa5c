"""Fixtures for the pipeline tests: a small PyTorch-style tree with its backend profile, a
fake OpenAI-compatible server that answers from the request's content, and a helper that
runs ``testcurator run`` in this process (so the server's thread serves its calls and
monkeypatched client settings apply).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

# fake_openai is a helper module of the agents tests, not an installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))

from fake_openai import FakeOpenAI, Reply, Status
from testcurator.config.llm import LLMSettings
from testcurator.cli.main import main
from testcurator.config.loader import load_config

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_TREE = REPO / "examples" / "upstream"
EXAMPLE_BACKEND = REPO / "examples" / "backend" / "backend.yaml"

# ---------------------------------------------------------------------------------------
# A small upstream-style tree: one device-generic file (an @ops test over `mul`, which the
# profile below does not support), one plain TestCase file, and a distributed folder.
SMALL_MATH = '''\
import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests, ops
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase, run_tests

mul_ops = [op for op in op_db if op.name == "mul" and op.variant_test_name == ""]


class TestSmallMath(TestCase):
    @dtypes(torch.float32)
    def test_add_float(self, device, dtype):
        x = torch.ones(3, device=device, dtype=dtype)
        self.assertEqual((x + x).sum().item(), 6)

    def test_zeros_sum(self, device):
        self.assertEqual(torch.zeros(4, device=device).sum().item(), 0)

    @ops(mul_ops, allowed_dtypes=(torch.float32,))
    def test_mul_matches_cpu(self, device, dtype, op):
        for sample in op.sample_inputs(device, dtype):
            op(sample.input, *sample.args, **sample.kwargs)


instantiate_device_type_tests(TestSmallMath, globals())

if __name__ == "__main__":
    run_tests()
'''

SMALL_VIEWS = '''\
import torch
from torch.testing._internal.common_utils import TestCase, run_tests


class TestSmallViews(TestCase):
    def test_view_shares_storage(self):
        x = torch.arange(6)
        self.assertEqual(x.view(2, 3).data_ptr(), x.data_ptr())

    def test_reshape_numel(self):
        self.assertEqual(torch.arange(6).reshape(3, 2).numel(), 6)


if __name__ == "__main__":
    run_tests()
'''

SMALL_DIST = '''\
import torch.distributed as dist
from torch.testing._internal.common_utils import TestCase, run_tests


class TestSmallDist(TestCase):
    def test_is_available(self):
        self.assertIsInstance(dist.is_available(), bool)


if __name__ == "__main__":
    run_tests()
'''

SMALL_BACKEND = """\
schema_version: 1
name: smalldev
device: {kind: privateuse1, name: smalldev}
hooks: [eager_ops, autograd]
preferences: ["Eager operator correctness matters most."]
supported_dtypes: [{name: float32}]
supported_ops: [{name: add}]
discover_ops: false
"""

MATH_TESTS = ("TestSmallMath::test_add_float", "TestSmallMath::test_mul_matches_cpu", "TestSmallMath::test_zeros_sum")
VIEW_TESTS = ("TestSmallViews::test_reshape_numel", "TestSmallViews::test_view_shares_storage")
SMALL_CANDIDATES = ("test/distributed", "test/test_small_math.py", "test/test_small_views.py")


def write_small_tree(root: Path) -> tuple[Path, Path]:
    """(torch root, backend.yaml) of the small tree, written under ``root``."""
    tree = root / "upstream"
    (tree / "test" / "distributed").mkdir(parents=True)
    (tree / "test" / "test_small_math.py").write_text(SMALL_MATH, encoding="utf-8")
    (tree / "test" / "test_small_views.py").write_text(SMALL_VIEWS, encoding="utf-8")
    (tree / "test" / "distributed" / "test_small_dist.py").write_text(SMALL_DIST, encoding="utf-8")
    (tree / "pytest.ini").write_text("[pytest]\ntestpaths = test\naddopts = -p no:cacheprovider\n", encoding="utf-8")
    backend = root / "backend" / "backend.yaml"
    backend.parent.mkdir(parents=True)
    backend.write_text(SMALL_BACKEND, encoding="utf-8")
    return tree, backend


def copy_example_tree(dest: Path) -> Path:
    shutil.copytree(EXAMPLE_TREE, dest, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    return dest


# ---------------------------------------------------------------------------------------
# A fake LLM that reads the batch it is asked about and answers it.
_SECTIONS = {
    "ScopeAnswer": re.compile(r"Candidate paths of the upstream test tree:\n(.*)\n\nDecide for every", re.DOTALL),
    "BucketAnswer": re.compile(r"(?:Tests to decide|Tests with their earlier decision and device results):\n(.*)\n\nDecide the mode", re.DOTALL),
    "SummaryAnswer": re.compile(r"^Tests:\n(.*)\n\nSummarise every test above", re.DOTALL),
}


def answer_kind(body: dict[str, Any]) -> str:
    """The answer model a request asks for: named by a json_schema response_format, else
    recognised from the prompt (JSON mode and plain text do not name it)."""
    named = ((body.get("response_format") or {}).get("json_schema") or {}).get("name")
    if named:
        return str(named)
    user = next((m["content"] for m in body["messages"] if m["role"] == "user"), "")
    return next((kind for kind, pattern in _SECTIONS.items() if pattern.search(user)), "")


@dataclass
class Policy:
    """How the fake model answers: ``modes`` per test (default xfail), paths to ``drop``,
    and names it gets wrong on purpose (``rename``: test or path -> what it says instead)."""

    modes: dict[str, str] = field(default_factory=dict)
    drop: frozenset[str] = frozenset({"test/distributed"})
    rename: dict[str, str] = field(default_factory=dict)
    default_mode: str = "xfail"

    def scope_item(self, cand: dict[str, Any]) -> dict[str, Any]:
        path = cand["path"]
        keep = path not in self.drop
        return {"path": self.rename.get(path, path), "reasoning": f"the fake model {'keeps' if keep else 'drops'} {path}",
                "evidence": [cand.get("summary", "")], "keep": keep, "needs_review": False, "missing": []}

    def bucket_item(self, item: dict[str, Any]) -> dict[str, Any]:
        test = item["test"] if "test" in item else item["request"]["test"]
        mode = self.modes.get(test, self.default_mode)
        return {"test": self.rename.get(test, test), "reasoning": f"the fake model chose {mode} for {test}",
                "evidence": [f"decorators: {len(item.get('decorators', []))}"], "mode": mode,
                "exclude_dtypes": [], "exclude_ops": [], "needs_review": False, "missing": []}


class AnsweringOpenAI(FakeOpenAI):
    """FakeOpenAI whose scripted faults are queued per answer model (``fault``) and which,
    with no fault pending, answers the batch it was sent according to ``policy``, after
    ``latency`` seconds (benchmarks stand in for a real model's response time with it)."""

    def __init__(self, latency: float = 0.0) -> None:
        super().__init__()
        self.latency = latency
        self.policy = Policy()
        self.faults: dict[str, deque[Reply | Status]] = {}
        self.kinds: list[str] = []
        self._fault_lock = threading.Lock()

    def fault(self, kind: str, *steps: Reply | Status) -> None:
        with self._fault_lock:
            self.faults.setdefault(kind, deque()).extend(steps)

    def reset(self, policy: Policy | None = None) -> None:
        with self._fault_lock:
            self.faults.clear()
        self.policy = policy or Policy()
        self.reject_formats = {}

    def _next(self, body: dict[str, Any]) -> Reply | Status | None:
        kind = answer_kind(body)
        with self._lock:
            self.requests.append(body)
            self.kinds.append(kind)
        with self._fault_lock:
            queue = self.faults.get(kind)
            if queue:
                return queue.popleft()
        return Reply(json.dumps(self._answer(kind, body)), delay=self.latency)

    def _answer(self, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        pattern = _SECTIONS.get(kind)
        user = next((m["content"] for m in body["messages"] if m["role"] == "user"), "")
        match = pattern.search(user) if pattern else None
        if match is None:
            raise AssertionError(f"fake LLM cannot read a {kind!r} request")
        items = json.loads(match.group(1))
        if kind == "ScopeAnswer":
            return {"decisions": [self.policy.scope_item(c) for c in items]}
        if kind == "SummaryAnswer":
            return {"summaries": [{"test": i["test"], "reasoning": "read the source",
                                   "summary": f"fake-llm summary of {i['test']}"} for i in items]}
        return {"decisions": [self.policy.bucket_item(i) for i in items]}


@pytest.fixture(scope="session")
def llm_server() -> Iterator[AnsweringOpenAI]:
    server = AnsweringOpenAI().start()
    try:
        yield server
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------
def fast_llm_settings(mp: pytest.MonkeyPatch, timeout: float = 30.0, max_retries: int = 1, summaries: bool = False) -> None:
    """A client timeout no answered request reaches on a loaded machine (a test that scripts a
    hung() request passes a shorter one), few and fast retries, one request at a time (scripted faults
    arrive in order) and no time budget (its first-question measuring would add a request) for every
    ``--brain llm`` run; summaries only where a test asks."""
    original = LLMSettings.from_env.__func__  # type: ignore[attr-defined]

    def from_env(cls: type[LLMSettings], env: Any = None, **overrides: Any) -> LLMSettings | None:
        given = {k: v for k, v in overrides.items() if v is not None}  # run passes budget_s=None without --llm-budget-s
        return original(cls, env, **{"idle_timeout": timeout, "budget_s": 0, "max_retries": max_retries, "retry_backoff": 0.05,
                                     "concurrency": 1, "summaries": summaries, **given})

    mp.setattr(LLMSettings, "from_env", classmethod(from_env))


def run_cli(tree: Path, backend: Path, out: Path, state: Path, *extra: str) -> int:
    """``testcurator run`` in this process; returns its exit code. Whatever the run wrote must
    pass ``validate`` at levels 1 and 2 (the tool agrees with itself, issue 22). A rerun runs
    the pipeline again (``--reuse-within 0``): that is what these tests look at."""
    from testcurator.config.levels import level2_problems

    code = main(["run", "--torch-root", str(tree), "--backend", str(backend), "--out", str(out),
                 "--state-dir", str(state), "--reuse-within", "0", *extra])
    configs = out / "configs"
    if code in (0, 1) and any(configs.rglob("*.yaml")):
        problems = level2_problems([configs], torch_root=tree)
        assert not problems, "the run's own configs fail validate --level 2:\n" + "\n".join(map(str, problems))
    return code


def config_bytes(configs: Path) -> dict[str, bytes]:
    """Every file under ``configs`` (the YAML and the emission sidecar), by relative path."""
    return {p.relative_to(configs).as_posix(): p.read_bytes() for p in sorted(configs.rglob("*")) if p.is_file()}


@dataclass(frozen=True)
class Entry:
    file: str
    test: str
    mode: str
    reason: str | None


def entries(configs: Path, tree: Path) -> dict[str, Entry]:
    """``file::Class::test`` -> its entry, over every emitted config."""
    out: dict[str, Entry] = {}
    loaded = load_config(configs, torch_root=tree)
    for f in loaded.files:
        rel = f.resolved_path.resolve().relative_to(tree.resolve()).as_posix()
        for e in f.entries:
            for name in e.names:
                out[f"{rel}::{name}"] = Entry(rel, name, e.mode, e.reason)
    return out


def read_report(out: Path) -> dict[str, Any]:
    return json.loads((out / "report.json").read_text(encoding="utf-8"))


def all_of(items: Sequence[Any], pred: Callable[[Any], bool]) -> bool:
    return bool(items) and all(pred(i) for i in items)


def configs_and_opmap(root: Path, yamls: dict[str, str], records: Sequence[dict[str, Any]]) -> tuple[Path, Path]:
    """A configs directory under ``root`` (``yamls``: path in it -> text) and a state
    directory whose op map holds ``records`` (capture lines), for enable-op."""
    from testcurator.memory.opmap import OpMap

    configs, state = root / "configs", root / "state"
    for rel, text in yamls.items():
        (configs / rel).parent.mkdir(parents=True, exist_ok=True)
        (configs / rel).write_text(text, encoding="utf-8")
    capture = root / "ops.jsonl"
    capture.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    opmap = OpMap(state)
    opmap.ingest(capture)
    opmap.close()
    return configs, state


@pytest.fixture(scope="session")
def kit() -> ModuleType:
    """This module: test files cannot import a conftest (--import-mode=importlib), so its
    helpers reach them through this fixture (``kit.run_cli``, ``kit.Policy`` ...)."""
    return sys.modules[__name__]
