"""The offline brain: the default, deterministic brain (no network) that decides from
evidence and small, named, ordered rules. Same inputs, same records, always.

Every record has ``brain="offline"`` and ``prompt_hash`` = a hash of
:data:`~testcurator.agents.offline.rules.RULES_VERSION` (bumped whenever a rule's outcome
changes, so caches and reports tell rule sets apart). Reasons are one sentence naming the
evidence; ``evidence`` lists the facts quoted. Preferences are read with the small grammar
of agents/offline/rules.py ("skip/no/ignore/... X", "focus on/include/... X", "only X").

Stage 1, scope (one FileDecision per path; first rule that decides wins):

====================  =====================================================================
preference_exclude    a preference excludes the path, its area or its area's hook(s) -> drop
                      (first: the team's explicit wish beats everything)
other_device          an area tied to another device (test_cuda*, mps, xpu, mkldnn) -> drop
preference_include    a preference asks for it (include/focus/only) -> keep, even without the
                      hook (after other_device: a CUDA-only file cannot run here anyway)
preference_only       "only X" and the path is a known area outside X -> drop
tooling               tests tooling (public bindings, typing, cpp extensions...) -> drop
empty                 n_tests == 0 and no sample tests -> drop
hooks                 known area: keep iff every area on the path has one hook the backend
                      implements (declared + included - excluded); no hooks declared -> keep,
                      needs_review
device_generic        unknown area, summary shows instantiate_device_type_tests -> keep (drop
                      if eager_ops is not implemented)
unknown               keep, needs_review (dropping is the costly mistake)
====================  =====================================================================

Stage 3, bucket (first rule that decides wins; ``ops``/``dtypes`` only add edits):

====================  =====================================================================
other_device          @onlyCUDA/@onlyCPU/@onlyOn(...)/@onlyNativeDeviceTypes..., @skipMeta,
                      @skipPRIVATEUSE1, skipIf(not TEST_CUDA), a test_cuda* file -> skip
upstream_skip         @unittest.skip -> skip; @unittest.expectedFailure -> xfail
takes_privateuse1     on a privateuse1 backend, the test registers privateuse1's device module
                      or renames it for a dummy of its own -> xfail (torch refuses: the
                      backend loaded in the process holds it), needs_review
needs                 needs a hook the backend lacks (autograd, compile, inductor, distributed,
                      sparse, quantized, nested, jit, export, onnx, amp, complex), or an area a
                      preference excludes (double backward, multi-device) -> skip; not for a
                      plain test that names no device and passed on CPU (it runs on CPU there)
known_missing_op      a captured ATen op is known unsupported -> skip naming it. Not
                      xfail_strict: the op cannot pass, and a run only costs CI time; the
                      op map re-admits the test when the op leaves unsupported_ops
ops                   every @ops op unsupported -> skip; known-gap ops -> exclude_ops
dtypes                no dtype left -> skip; known-gap dtypes, complex/quantized dtypes
                      without their hook, dtypes a preference excludes -> exclude_dtypes
similar               no ops and no captured ATen ops: follow a strict majority of close
                      neighbours (score = similarity, 1 is identical; >= 0.75, best 5, a
                      lone neighbour needs >= 0.9; xfail_strict read as xfail), needs_review
default               mandatory_success; without captured ops and without a fallback,
                      needs_review ("to be confirmed by execution")
====================  =====================================================================

Hooks are the declared ones, plus those a preference includes, minus those it excludes; a
profile without hooks infers nothing from them (scope keeps known areas for review).
Ops and dtypes outside a *declared* ``supported_ops``/``supported_dtypes`` list are not
excluded per test: the config's ``global`` capability list filters them at run time, so
enabling an op or dtype there admits every test waiting on it. Only known gaps
(``unsupported_ops``/``unsupported_dtypes``, hooks, preferences) become edits.

Stage 4, refine (per test, from its variants' records; outcomes ``crashed``/``xfailed``
count as failures, ``xpassed`` as a pass, except that variants which xfailed on every attempt
beside variants that pass are upstream's own expected failures, kept and green under
mandatory_success; ``infrastructure``/``transient`` records and all-skipped variants are not
evidence):

====================  =====================================================================
(re-bucket)           no previous decision, or one the capability rails now reject (a gap
                      learnt since): the bucket rules decide the previous decision first
no_records            keep the previous decision unchanged
infrastructure        only infrastructure failures -> previous mode, needs_review
skipped               every variant skipped by the test itself -> skip (unless already skip)
previous_skip         a skip stays skip; if every variant passed: needs_review, "promotion
                      proposed: passes on the device"
exclusions            variants failing on every attempt whose dtype (or op, or module) fails
                      in every variant that has it -> exclude_dtypes/exclude_ops/
                      exclude_modules (the class picks the dimension first: unsupported_op ->
                      op, others -> dtype, module, then an @ops op at one dtype,
                      ``linalg.tensorsolve@complex128``; none when nothing would be left to
                      run); failures none of these explain that all share one @parametrize
                      value no other variant has -> exclude_params (``shape=2x3``); then:
crash                 a crash or timeout of an @ops op -> that op excluded in the dtypes it
                      crashed in where it passes in another (``exclude_ops`` entry
                      ``masked.std@complex64``: the config's op with ``dtypes``), else the
                      whole op; an unexcludable one -> skip (it takes down the worker)
consistent_failure    every remaining variant fails -> xfail_strict (class + evidence line);
                      xfail when it fails on CPU too (upstream's failure: its pass depends
                      on order and environment, and says nothing of the backend)
partial_failure       unexcludable failures beside passes -> xfail, needs_review
intermittent          a variant fails on its last attempt after passing -> xfail, review
passed                xfail_strict -> mandatory_success (promotion); xfail -> promoted when
                      a brain made it (or the pipeline wrote it and nobody changed it), a
                      person's xfail is kept, needs_review, "promotion proposed: passes
                      consistently";
                      mandatory_success -> kept (flaky = passes on retry: kept, review)
capability_guard      a mandatory result that calls a known-unsupported op -> xfail, review
====================  =====================================================================

The rules live in agents/offline/scope.py, agents/offline/bucket.py and
agents/offline/refine.py; their shared vocabulary in agents/offline/rules.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from testcurator.agents.brain import BrainContext, BrainSettings, BucketRequest, RefineRequest, ScopeRequest, Usage
from testcurator.agents.decision import Decision, FileDecision
from testcurator.agents.offline.bucket import decide_bucket
from testcurator.agents.offline.refine import decide_refine
from testcurator.agents.offline.rules import parse_preferences
from testcurator.agents.offline.scope import decide_scope


class OfflineBrain:
    """The ``offline`` entry of the brain registry (see the module docstring)."""

    name = "offline"

    def __init__(self, settings: BrainSettings | None = None) -> None:
        self.settings = settings
        self.usage = Usage()

    def scope(self, requests: Sequence[ScopeRequest], ctx: BrainContext) -> list[FileDecision]:
        wishes = parse_preferences(ctx.backend.preferences)
        return [decide_scope(r, ctx.backend, wishes) for r in requests]

    def bucket(self, requests: Sequence[BucketRequest], ctx: BrainContext) -> list[Decision]:
        wishes = parse_preferences(ctx.backend.preferences)
        return [decide_bucket(r, ctx.backend, wishes) for r in requests]

    def refine(self, requests: Sequence[RefineRequest], ctx: BrainContext) -> list[Decision]:
        wishes = parse_preferences(ctx.backend.preferences)
        return [decide_refine(r, ctx.backend, wishes) for r in requests]
