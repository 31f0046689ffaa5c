"""Rails: deterministic checks no brain's answer can pass around.

A decision is rejected when it names a test that is not in memory (or not in the batch),
uses a mode outside the four, demands ``mandatory_success`` of a test that cannot run on
the backend (known unsupported op, or nothing but unsupported dtypes/ops left), contradicts
execution evidence, or (scope) names a path outside the test tree or not asked about.
Requests left without a decision are reported too, so the caller can decide them another
way. The checks return violations; they never fix an answer (the caller re-asks or falls
back, and the report says so).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from testcurator.agents.brain import BackendContext, BucketRequest, RefineRequest, ScopeRequest
from testcurator.agents.decision import Decision, FileDecision
from testcurator.plugin.callspec import split_key
from testcurator.vocab import MODES, NOT_EVIDENCE_CLASSES, op_matches, split_op_at

UNKNOWN_TEST = "unknown_test"
NOT_REQUESTED = "not_requested"
MISSING = "missing"
DUPLICATE = "duplicate"
BAD_MODE = "bad_mode"
UNSUPPORTED_MANDATORY = "unsupported_mandatory"
CONTRADICTS_EXECUTION = "contradicts_execution"
BAD_EDIT = "bad_edit"
NO_REASON = "no_reason"
UNSUPPORTED_DROP = "unsupported_drop"
UNFOUNDED_CLAIM = "unfounded_claim"
COPIED_REASON = "copied_reason"
MIN_REASON_WORDS = 4
MIN_COPIED_WORDS = 6
PATH_OUTSIDE_TREE = "path_outside_tree"
UNKNOWN_PATH = "unknown_path"


@dataclass(frozen=True)
class RailViolation:
    """One broken rail: the test or path it concerns, the rule, and what was wrong."""

    subject: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.subject}: [{self.rule}] {self.message}"


def check_bucket(
    decisions: Sequence[Decision],
    requests: Sequence[BucketRequest | RefineRequest],
    known_tests: Collection[str],
    backend: BackendContext,
) -> list[RailViolation]:
    """Every rail a batch of test decisions (stage 3 or 4) breaks."""
    by_test = {r.test: r for r in requests}
    violations = _coverage([d.test for d in decisions], list(by_test))
    for decision in decisions:
        if decision.test not in known_tests:
            violations.append(RailViolation(decision.test, UNKNOWN_TEST, "no such test in memory"))
            continue
        request = by_test.get(decision.test)
        if request is None:
            violations.append(RailViolation(decision.test, NOT_REQUESTED, "this test was not in the batch"))
            continue
        if decision.mode not in MODES:
            violations.append(RailViolation(decision.test, BAD_MODE, f"mode {decision.mode!r} is not one of {', '.join(MODES)}"))
            continue
        violations.extend(_capability_rails(decision, request, backend))
        if isinstance(request, RefineRequest):
            violations.extend(_execution_rails(decision, request))
    return violations


def _base(request: BucketRequest | RefineRequest) -> BucketRequest:
    """The bucket request behind a refine request (the test's static evidence)."""
    return request.request if isinstance(request, RefineRequest) else request


def _with_base(decisions: Sequence[Decision], requests: Sequence[BucketRequest | RefineRequest]
               ) -> list[tuple[Decision, BucketRequest]]:
    """Each decision with its request's static evidence (decisions outside the batch left
    out: check_bucket says so)."""
    by_test = {r.test: _base(r) for r in requests}
    return [(d, by_test[d.test]) for d in decisions if d.test in by_test]


def check_edits(decisions: Sequence[Decision], requests: Sequence[BucketRequest | RefineRequest]) -> list[RailViolation]:
    """A model's exclusions that the config could not carry: a dtype or an OpInfo op the test
    is not parametrized over (``validate --level 2`` rejects an edit that never applies).
    The offline brain derives its exclusions from these same lists; a model may invent them."""
    out = []
    request_of = {r.test: r for r in requests}
    for decision, base in _with_base(decisions, requests):
        dtypes = [d for d in decision.exclude_dtypes if d not in base.dtypes]
        if dtypes:
            out.append(RailViolation(decision.test, BAD_EDIT, f"exclude_dtypes {', '.join(dtypes)}: the test's dtypes are "
                                     f"{', '.join(base.dtypes) or 'none (not parametrized by dtype)'}"))
        ops = [o for o in decision.exclude_ops if not _names_op_of(o, _op_names(base, request_of[decision.test]), base.dtypes)]
        if ops:
            at = f" and its dtypes {', '.join(base.dtypes) or 'none'}" if any(split_op_at(o)[1] for o in ops) else ""
            out.append(RailViolation(decision.test, BAD_EDIT, f"exclude_ops {', '.join(ops)}: the test's OpInfo ops are "
                                     f"{', '.join(base.ops) or 'none (not an @ops test)'}{at}"))
    return out


def _op_names(base: BucketRequest, request: BucketRequest | RefineRequest) -> tuple[str, ...]:
    """The names an exclusion may give the test's ops: its OpInfos', and the variants its
    execution records name as its instances do (``div_floor_rounding``: refine excludes one
    OpInfo variant alone, as the config and the plugin can)."""
    if not isinstance(request, RefineRequest):
        return base.ops
    variants = {name for r in request.executions if (name := r.op_name) and name != r.op}
    return (*base.ops, *sorted(variants))


def _names_op_of(entry: str, ops: Sequence[str], dtypes: Sequence[str]) -> bool:
    """Whether an ``exclude_ops`` entry names one of the test's OpInfo ops (at one of its dtypes)."""
    op, dtype = split_op_at(entry)
    return any(op_matches(o, op) for o in ops) and (dtype is None or dtype in dtypes)


def check_reasons(subjects_and_reasons: Sequence[tuple[str, str]], prompt_text: str = "") -> list[RailViolation]:
    """A model's reasoning that says nothing a reviewer can read, or is not its own: fewer than
    :data:`MIN_REASON_WORDS` words of prose (identifiers, paths, dtypes and numbers are not
    words: a 270M model answered "unsupported_dtype (float64)" and "It only calls
    aten::_local_scalar_dense"), or a sentence copied from ``prompt_text`` (the prompt's own
    example, which says nothing about this test). The config would carry it as the reason."""
    out = []
    copied = _normal(prompt_text)
    for subject, reason in subjects_and_reasons:
        words = [w for w in reason.split() if _PROSE.fullmatch(w)]
        if len(words) < MIN_REASON_WORDS:
            out.append(RailViolation(subject, NO_REASON, f"the reasoning {reason[:40]!r} says nothing: write at least "
                                                         f"{MIN_REASON_WORDS} plain words on this test's evidence"))
        elif len(words) >= MIN_COPIED_WORDS and _normal(reason) in copied:
            out.append(RailViolation(subject, COPIED_REASON, "the reasoning is copied from the prompt's example: write "
                                                             "this test's own from its evidence"))
    return out


def _normal(text: str) -> str:
    return " ".join(text.lower().replace('"', " ").split()).strip(" .")


_PROSE = re.compile(r"[(\"']?[A-Za-z]{2,}(?:'[a-z]+)?[)\"',.;:!?]*")
_ATEN = re.compile(r"aten::[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?")


def check_claims(decisions: Sequence[Decision], requests: Sequence[BucketRequest | RefineRequest]) -> list[RailViolation]:
    """A reasoning that names an ATen op the test never called (on CPU, in the capture): a small
    model copies the prompt's example ("It only calls aten::add.Tensor...") onto tests that
    call other ops; the config would carry a false reason."""
    out = []
    for decision, base in _with_base(decisions, requests):
        gaps = base.probe.gaps if base.probe else {}
        # An op the probe's error names (a composite's missing inner kernel) is evidence too.
        called = [*base.aten_ops, *(split_key(call)[0] for call in gaps), *_ATEN.findall(" ".join(e for _, e in gaps.values()))]
        unfounded = sorted({op for op in _ATEN.findall(decision.reason)
                            if not any(op_matches(c, op) or op_matches(op, c) for c in called)})
        if unfounded:
            out.append(RailViolation(decision.test, UNFOUNDED_CLAIM, f"the reasoning names {', '.join(unfounded)}, which the "
                                     f"test never called (its aten_ops: {', '.join(base.aten_ops[:8]) or 'none known'})"))
    return out


def check_drops(decisions: Sequence[FileDecision], kept_by_rules: Mapping[str, str]) -> list[RailViolation]:
    """A model's scope drop of a path the deterministic rules keep on evidence (``kept_by_rules``:
    path -> their reason; the caller leaves out what they keep for review only). Dropping is the
    costly mistake: a dropped path is never looked at again, while a kept one only costs the
    bucket stage's time; the model may keep more than the rules, and drop only what they do
    not know about."""
    return [RailViolation(d.path, UNSUPPORTED_DROP, f"the rules keep this path ({kept_by_rules[d.path][:120]}); "
                                                    "keep it unless a hook or preference rules it out")
            for d in decisions if not d.keep and d.path in kept_by_rules]


def _coverage(answered: list[str], requested: list[str]) -> list[RailViolation]:
    counts = Counter(answered)
    out = [RailViolation(name, DUPLICATE, f"decided {n} times") for name, n in counts.items() if n > 1]
    out += [RailViolation(name, MISSING, "no decision for this request") for name in requested if name not in counts]
    return out


def _capability_rails(decision: Decision, request: BucketRequest | RefineRequest, backend: BackendContext) -> list[RailViolation]:
    if decision.mode != "mandatory_success":
        return []
    base = _base(request)
    out = []
    # ATen ops the test calls cannot be filtered per variant: one missing op fails the test.
    missing_aten = sorted(op for op in base.aten_ops if backend.op_unsupported(op))
    if missing_aten:
        out.append(RailViolation(decision.test, UNSUPPORTED_MANDATORY, f"calls unsupported op(s) {', '.join(missing_aten)}"))
    # Parametrized ops/dtypes are filtered per variant by the plugin, so only a test with
    # nothing runnable left is a contradiction.
    ops = [op for op in base.ops if not any(op_matches(op, x) for x in decision.exclude_ops)]
    if base.ops and all(backend.op_unsupported(op) for op in ops):
        out.append(RailViolation(decision.test, UNSUPPORTED_MANDATORY, f"no supported op left among {', '.join(base.ops)}"))
    dtypes = [d for d in base.dtypes if d not in decision.exclude_dtypes]
    if base.dtypes and all(backend.dtype_unsupported(d) for d in dtypes):
        out.append(RailViolation(decision.test, UNSUPPORTED_MANDATORY, f"no supported dtype left among {', '.join(base.dtypes)}"))
    return out


def _execution_rails(decision: Decision, request: RefineRequest) -> list[RailViolation]:
    kept = [r for r in request.executions
            if not r.excluded_by_edits(decision) and r.failure_class not in NOT_EVIDENCE_CLASSES]
    if decision.mode == "mandatory_success":
        failing = [r for r in kept if r.consistently_failed]
        if len(failing) < len(kept):  # beside a pass, upstream's expected failures stay green (refine keeps them)
            failing = [r for r in failing if not r.expected_failure]
        if failing:
            return [RailViolation(decision.test, CONTRADICTS_EXECUTION,
                                  f"mandatory_success but failed on every attempt: {', '.join(sorted(r.variant for r in failing))}")]
    if decision.mode == "xfail_strict" and kept and all(r.consistently_passed for r in kept):
        return [RailViolation(decision.test, CONTRADICTS_EXECUTION,
                              "xfail_strict but every variant passed on every attempt (an unexpected pass fails CI)")]
    return []


def check_scope(decisions: Sequence[FileDecision], requests: Sequence[ScopeRequest], tree: Path) -> list[RailViolation]:
    """Every rail a batch of scope decisions breaks: paths outside the tree or not asked."""
    root = tree.resolve()
    requested = {r.path for r in requests}
    violations = _coverage([d.path for d in decisions], [r.path for r in requests])
    for decision in decisions:
        # resolve() follows ".." and symlinks; an absolute path replaces the root entirely.
        if not (root / decision.path).resolve().is_relative_to(root):
            violations.append(RailViolation(decision.path, PATH_OUTSIDE_TREE, f"resolves outside the test tree {root}"))
        elif decision.path not in requested:
            violations.append(RailViolation(decision.path, UNKNOWN_PATH, "this path was not among the candidates"))
    return violations


def rejected_subjects(violations: Sequence[RailViolation], requested: Collection[str]) -> set[str]:
    """Requested tests/paths whose decision must be redone (violations on names outside the
    batch only mean that decision is dropped)."""
    return {v.subject for v in violations if v.subject in requested}
