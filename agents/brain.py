"""The role every stage agent delegates its decisions to: a brain.

One Protocol (:class:`Brain`), an explicit registry (:data:`BRAINS`), and the request
records that carry the evidence a brain decides from. A brain answers a *batch*: one
decision per request, in request order. The offline brain (agents/offline/brain.py) decides
from evidence and rules; the LLM brain (agents/llm/brain.py) asks an OpenAI-compatible endpoint
and is checked by the rails (agents/rails.py) before anything it says is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from testcurator.agents.decision import Decision, FileDecision
from testcurator.config.params import excludes
from testcurator.memory.capability import ProbeEvidence
from testcurator.names import formatted_op, split_dtypes
from testcurator.vocab import FAILED_EVIDENCE, PASSED_EVIDENCE, op_excluded, op_matches

if TYPE_CHECKING:
    from testcurator.config.llm import LLMSettings
    from testcurator.config.profile import BackendProfile


@dataclass(frozen=True)
class BackendContext:
    """What a brain knows of the backend: declared capabilities and known gaps.

    ``supported_dtypes`` / ``supported_ops`` are as declared (None: not declared, so no
    inference from absence). ``unsupported_*`` are known gaps (declared, or learnt from
    execution). ``registered_ops`` are ATen ops the backend's source registers (discovery),
    informative only: composite ops run without a registration.
    """

    name: str
    device: str
    hooks: tuple[str, ...] = ()
    preferences: tuple[str, ...] = ()
    supported_dtypes: frozenset[str] | None = None
    supported_ops: Mapping[str, frozenset[str] | None] | None = None
    unsupported_ops: frozenset[str] = frozenset()
    unsupported_dtypes: frozenset[str] = frozenset()
    registered_ops: frozenset[str] = frozenset()
    has_fallback: bool = False

    @classmethod
    def from_profile(cls, profile: BackendProfile, *, registered_ops: Iterable[str] = (), has_fallback: bool = False,
                     unsupported_ops: Iterable[str] = (), unsupported_dtypes: Iterable[str] = ()) -> BackendContext:
        """The context for ``profile`` plus what discovery and execution found."""
        ops = None if profile.supported_ops is None else {
            o.name: None if o.dtypes is None else frozenset(d.name for d in o.dtypes) for o in profile.supported_ops}
        dtypes = None if profile.supported_dtypes is None else frozenset(d.name for d in profile.supported_dtypes)
        return cls(name=profile.name, device=profile.device.torch_name, hooks=tuple(profile.hooks),
                   preferences=tuple(profile.preferences), supported_dtypes=dtypes, supported_ops=ops,
                   unsupported_ops=frozenset(unsupported_ops), unsupported_dtypes=frozenset(unsupported_dtypes),
                   registered_ops=frozenset(registered_ops), has_fallback=has_fallback)

    def dtype_unsupported(self, dtype: str) -> bool:
        """A dtype pair's instance (``bfloat16_int32``) is unsupported when any member is, as
        the plugin's capability rule reads it; the pair's own name is in no dtype list."""
        return any(d in self.unsupported_dtypes or (self.supported_dtypes is not None and d not in self.supported_dtypes)
                   for d in split_dtypes(dtype))

    def op_unsupported(self, op: str) -> bool:
        """Known unsupported; a declared ``supported_ops`` list covers OpInfo names only."""
        if any(op_matches(op, entry) for entry in self.unsupported_ops):
            return True
        if self.supported_ops is None or op.startswith("aten::"):
            return False
        return op not in self.supported_ops

    def to_prompt(self) -> dict[str, Any]:
        """JSON-ready, sorted: what prompts show and what cache keys hash."""
        ops = None if self.supported_ops is None else {
            k: None if v is None else sorted(v) for k, v in sorted(self.supported_ops.items())}
        return {
            "name": self.name, "device": self.device, "hooks": list(self.hooks),
            "preferences": list(self.preferences),
            "supported_dtypes": None if self.supported_dtypes is None else sorted(self.supported_dtypes),
            "supported_ops": ops, "unsupported_ops": sorted(self.unsupported_ops),
            "unsupported_dtypes": sorted(self.unsupported_dtypes),
            "registered_ops": sorted(self.registered_ops), "has_fallback": self.has_fallback,
        }


@dataclass(frozen=True)
class BrainContext:
    """Per-run facts every batch is checked against: the backend, the tests that exist in
    memory (names outside it are rejected), and the upstream test tree's root."""

    backend: BackendContext
    known_tests: frozenset[str]
    tree: Path


@dataclass(frozen=True)
class ScopeRequest:
    """Stage 1: one folder or file of the test tree (``path`` relative to the tree)."""

    path: str
    kind: Literal["dir", "file"]
    summary: str = ""
    n_tests: int | None = None
    sample_tests: tuple[str, ...] = ()


@dataclass(frozen=True)
class SimilarTest:
    """A nearby, already-decided test from memory (embedding neighbour)."""

    test: str
    mode: str
    reason: str
    score: float


# How much of a test's source a bucket request shows: a longer test is cut there.
SOURCE_LINES = 60


@dataclass(frozen=True)
class BucketRequest:
    """Stage 3: one device-generic test and the evidence memory holds about it.

    ``ops`` are OpInfo ops the test is parametrized over (``@ops``), ``aten_ops`` the ATen
    ops it called when run under the op-capturing dispatch mode (``layout_ops``: those it called
    with a tensor of another layout than strided, with the layout, ``aten::clone[sparse_coo]``), ``dtypes`` its
    parametrized dtypes, ``modules`` its ``@modules`` ModuleInfos. ``probe``: what the
    device's capability table says about the calls it made (None: not probed).
    ``cpu_outcomes``: how each instance the capture ran on CPU (the reference device) ended,
    and ``cpu_failure`` the first CPU failure's exception line; ``cpu_failed`` the (dtype, op,
    module) of each instance that failed there ('' for none).
    """

    test: str
    file: str
    content_hash: str
    summary: str = ""
    decorators: tuple[str, ...] = ()
    ops: tuple[str, ...] = ()
    aten_ops: tuple[str, ...] = ()
    layout_ops: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    source: str = ""  # its first SOURCE_LINES lines (decorators and def included)
    similar: tuple[SimilarTest, ...] = ()
    probe: ProbeEvidence | None = None
    cpu_outcomes: tuple[str, ...] = ()
    cpu_failure: str = ""
    cpu_failed: tuple[tuple[str, str, str], ...] = ()


class Edits(Protocol):
    """What a decision or a prediction excludes from a test (its config entry's ``edits``)."""

    @property
    def exclude_dtypes(self) -> tuple[str, ...]: ...
    @property
    def exclude_ops(self) -> tuple[str, ...]: ...
    @property
    def exclude_modules(self) -> tuple[str, ...]: ...
    @property
    def exclude_params(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class ExecutionRecord:
    """One instantiated variant's results on the device, one outcome per attempt."""

    variant: str
    outcomes: tuple[str, ...]
    dtype: str | None = None
    op: str | None = None
    module: str | None = None
    failure_class: str | None = None
    message: str = ""
    # @parametrize values, (argument, repr of the live value): refine separates by them too.
    params: tuple[tuple[str, str], ...] = ()
    # The OpInfo's variant (``floor_rounding`` of ``div``): refine may exclude one variant alone.
    op_variant: str | None = None

    def __post_init__(self) -> None:
        if any(not isinstance(p, tuple) for p in self.params):  # from JSON (checkpoints, caches)
            object.__setattr__(self, "params", tuple(tuple(p) for p in self.params))

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The variant's dtypes: one, or both members of a dtype pair."""
        return split_dtypes(self.dtype)

    @property
    def op_name(self) -> str | None:
        """The op as narrowly as a config names it: a variant as its test does (``div_floor_rounding``)."""
        return formatted_op(self.op, self.op_variant) if self.op and self.op_variant else self.op

    def op_excluded(self, entries: Collection[str]) -> bool:
        """Whether ``exclude_ops`` entries remove this variant (its OpInfo's or its own name), as the plugin does."""
        return op_excluded(self.op, self.dtypes, entries) or (
            self.op_name != self.op and op_excluded(self.op_name, self.dtypes, entries))

    def excluded_by(self, dtypes: Collection[str]) -> bool:
        """Whether an exclusion of ``dtypes`` removes this variant (any member counts)."""
        return any(d in dtypes for d in self.dtypes)

    def excluded_by_params(self, refs: Collection[str]) -> bool:
        """Whether an ``edits.params`` exclusion (``name=value`` refs) removes this variant."""
        return bool(refs) and excludes(refs, self.params)

    def excluded_by_edits(self, edits: Edits) -> bool:
        """Whether one of ``edits``' exclusions (dtypes, ops, modules, params) removes this variant."""
        return (self.excluded_by(edits.exclude_dtypes) or self.op_excluded(edits.exclude_ops)
                or bool(self.module and self.module in edits.exclude_modules)
                or self.excluded_by_params(edits.exclude_params))

    @property
    def consistently_failed(self) -> bool:
        return bool(self.outcomes) and all(o in FAILED_EVIDENCE for o in self.outcomes)

    @property
    def expected_failure(self) -> bool:
        """Every attempt xfailed: upstream's own expected failure. The draft runs every test as
        mandatory_success, where an xfail stays green and an unexpected pass fails."""
        outcomes = [o for o in self.outcomes if o != "skipped"]
        return bool(outcomes) and all(o == "xfailed" for o in outcomes)

    @property
    def consistently_passed(self) -> bool:
        return bool(self.outcomes) and all(o in PASSED_EVIDENCE for o in self.outcomes)


@dataclass(frozen=True)
class RefineRequest:
    """Stage 4: a test, its earlier decision, and what happened on the device."""

    request: BucketRequest
    previous: Decision | None
    executions: tuple[ExecutionRecord, ...] = ()

    @property
    def test(self) -> str:
        return self.request.test


def request_json(request: Any) -> dict[str, Any]:
    """A request dataclass as JSON-ready dict (prompts, cache keys)."""
    return {f.name: _plain(getattr(request, f.name)) for f in fields(request)}


def _plain(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return {k: _plain(v) for k, v in asdict(value).items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


@dataclass
class Usage:
    """Accounting for the report: LLM calls, tokens (reported, and estimated before sending),
    seconds waiting for answers, cache hits, failures, transport retries, structured-output
    downshifts, re-asks, rail violations, fallbacks, decisions over the time budget."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated_prompt_tokens: int = 0
    latency_s: float = 0.0
    cache_hits: int = 0
    cached_items: int = 0
    failures: int = 0
    transport_retries: int = 0
    downshifts: int = 0
    reasks: int = 0
    rail_violations: int = 0
    fallbacks: int = 0
    over_budget: int = 0  # decisions not asked: the time budget could not pay for them

    def add(self, other: Usage) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, float]:
        data = asdict(self)
        data["latency_s"] = round(self.latency_s, 3)
        return data


class Brain(Protocol):
    """Decides a batch: one record per request, in request order."""

    name: str
    usage: Usage

    def scope(self, requests: Sequence[ScopeRequest], ctx: BrainContext) -> list[FileDecision]: ...

    def bucket(self, requests: Sequence[BucketRequest], ctx: BrainContext) -> list[Decision]: ...

    def refine(self, requests: Sequence[RefineRequest], ctx: BrainContext) -> list[Decision]: ...


@dataclass(frozen=True)
class BrainSettings:
    """What a brain factory gets. ``fallback`` is the brain the LLM brain hands rejected
    answers to (default: a new offline brain)."""

    llm: LLMSettings | None = None
    state_dir: Path | None = None
    fallback: Brain | None = field(default=None, compare=False)
    say: Callable[[str], None] | None = field(default=None, compare=False)  # progress lines (the LLM brain's)
