"""The offline brain's stage 1, scope: the areas of the upstream test tree (folder and
file-stem globs, the hooks or devices each needs) and the scope rules over them, tabled
in agents/offline/brain.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from testcurator.agents.brain import BackendContext, ScopeRequest
from testcurator.agents.decision import FileDecision
from testcurator.agents.offline.rules import Polarity, Wish, effective_hooks, file_decision, names, quote
from testcurator.config.profile import HOOK_DESCRIPTIONS


@dataclass(frozen=True)
class Area:
    """A part of the test tree: folder or file-stem globs, the hooks it needs (any one),
    the only devices it runs on, or the tooling it tests instead of a device."""

    label: str
    globs: tuple[str, ...]
    hooks: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    tooling: str = ""


def _a(label: str, globs: str, hooks: str = "", devices: str = "", tooling: str = "") -> Area:
    return Area(label, tuple(globs.split()), tuple(hooks.split()), tuple(devices.split()), tooling)


# First match per path component wins: specific globs before the broad ones they overlap.
AREAS: tuple[Area, ...] = (
    _a("cuda", "cuda test_cuda* test_jiterator* test_nvfuser* test_cudnn* test_cpp_extensions_stream*", devices="cuda"),
    _a("mps", "mps test_mps*", devices="mps"), _a("xpu", "xpu test_xpu*", devices="xpu"),
    _a("cpu", "test_mkldnn* test_mkl_verbose test_openmp test_xnnpack* test_set_default_mobile_cpu_allocator",
       devices="cpu"),
    _a("vulkan", "test_vulkan* test_metal*", devices="vulkan metal"),
    _a("tooling", "test_public_bindings test_typing typing test_type_hints test_license test_hub test_show_pickle "
       "test_bundled_* test_model_dump test_import_stats test_determination test_utils test_tensorboard "
       "test_datapipe test_throughput_benchmark test_monitor test_function_schema test_sympy_utils "
       "benchmark_utils lint scripts", tooling="PyTorch's tooling and packaging"),
    _a("cpp", "cpp cpp_extensions custom_backend custom_operator test_cpp_extensions* test_cpp_api_parity "
       "package test_package mobile test_mobile*", tooling="C++ / packaging / mobile APIs"),
    _a("autograd", "autograd test_autograd* test_ops_gradients* test_ops_fwd_gradients* test_functional_autograd*",
       "autograd"),
    _a("compile", "dynamo test_compile* compiled_autograd higher_order_ops test_dynamic_shapes test_fake_tensor "
       "test_proxy_tensor test_aotdispatch* test_aot_*", "compile"),
    _a("inductor", "inductor test_inductor*", "inductor"),
    _a("distributed", "distributed test_c10d* test_distributed*", "distributed"),
    _a("sparse", "sparse test_sparse*", "sparse"),
    _a("quantized", "quantization ao test_quantization* test_quantized*", "quantized"),
    _a("nested", "nested test_nestedtensor* test_nested*", "nested"),
    _a("jit", "jit jit_hooks test_jit* test_tensorexpr* test_fuser test_file_check test_ops_jit", "jit"),
    _a("export", "export test_export*", "export"), _a("onnx", "onnx test_onnx*", "onnx"),
    _a("fx", "fx test_fx*", "compile export"),
    _a("amp", "amp test_autocast*", "amp"), _a("fft", "test_spectral_ops* test_fft*", "fft"),
    _a("linalg", "test_linalg*", "linalg"), _a("random", "distributions test_distributions*", "random"),
    _a("serialization", "test_serialization*", "serialization"), _a("profiler", "profiler test_profiler*", "profiler"),
    _a("complex", "test_complex*", "complex"),
    _a("multiprocessing", "test_multiprocessing*", "eager_ops"),
    _a("functorch", "functorch", "eager_ops"),
    _a("eager", "nn test_ops* test_torch test_view_ops test_nn* test_modules test_binary_ufuncs test_unary_ufuncs "
       "test_reductions test_shape_ops test_indexing test_tensor_creation_ops test_type_promotion "
       "test_sort_and_select test_scatter_gather test_segment_reductions test_foreach test_prims test_decomp "
       "test_masked test_maskedtensor test_numpy_interop test_dlpack test_native_mha test_transformers "
       "test_native_functions test_python_dispatch test_schema_check test_overrides test_namedtensor "
       "test_stateless test_expanded_weights test_functionalization optim test_optim* test_pooling "
       "test_convolution test_embedding test_dropout", "eager_ops"),
)
_DEVICE_GENERIC = re.compile(r"instantiate_device_type_tests|device-generic|device generic", re.I)


@dataclass(frozen=True)
class PathFacts:
    """What the scope rules read of one candidate path."""

    where: str
    parts: tuple[str, ...]  # path components, ``.py`` stripped
    areas: tuple[tuple[str, Area], ...]  # (component, its area) for every matched component
    hooks: frozenset[str] | None


@lru_cache(maxsize=8192)  # the bucket stage asks once per test: the same few paths, thousands of times
def path_facts(path: str, kind: str, hooks: frozenset[str] | None) -> PathFacts:
    parts = tuple(p.removesuffix(".py") for p in path.strip("/").split("/") if p not in ("", "."))
    areas = tuple((part, area) for part in parts
                  for area in [next((a for a in AREAS if any(fnmatch_(part, g) for g in a.globs)), None)] if area)
    return PathFacts(path.rstrip("/") + ("/" if kind == "dir" else ""), parts, areas, hooks)


def fnmatch_(name: str, glob: str) -> bool:
    return name.startswith(glob[:-1]) if glob.endswith("*") else name == glob


def _wish_hits(wish: Wish, facts: PathFacts, area: Area | None) -> bool:
    if wish.kind == "path":
        return wish.value.removesuffix(".py") in facts.parts
    if area is None:
        return False
    if wish.kind == "area":
        return wish.value == area.label
    return wish.kind == "hook" and wish.value in area.hooks


def _matching(wishes: Sequence[Wish], polarity: Polarity, facts: PathFacts) -> tuple[Wish, str] | None:
    """The first wish of ``polarity`` naming this path (directly, by area label, or a hook
    of its area; an exclusion needs every hook of a multi-hook area excluded), and a phrase
    saying how it names it."""
    chosen = [w for w in wishes if w.polarity == polarity]
    for part, area in facts.areas or (("", None),):  # type: ignore[assignment]
        hits = [w for w in chosen if _wish_hits(w, facts, area)]
        if polarity == "exclude" and area is not None and len(area.hooks) > 1:
            named = {w.value for w in hits if w.kind == "hook"}
            hits = [w for w in hits if w.kind != "hook" or named >= set(area.hooks)]
        if hits:
            wish = hits[0]
            if wish.kind == "path" or area is None:
                return wish, f"names {facts.where} itself"
            hooks = f", hook {' or '.join(area.hooks)}" if area.hooks else ""
            return wish, f"covers {facts.where} ({part}: area {area.label}{hooks})"
    return None


ScopeRule = Callable[[ScopeRequest, PathFacts, BackendContext, Sequence[Wish]], FileDecision | None]


def scope_preference_exclude(req: ScopeRequest, f: PathFacts, backend: BackendContext,
                             wishes: Sequence[Wish]) -> FileDecision | None:
    hit = _matching(wishes, "exclude", f)
    if hit is None:
        return None
    wish, what = hit
    return file_decision(req.path, False, f"Dropped: the {wish.quote()} excludes {wish.value}, which {what}.",
                         (wish.quote(), what))


def scope_other_device(req: ScopeRequest, f: PathFacts, backend: BackendContext,
                       wishes: Sequence[Wish]) -> FileDecision | None:
    for part, area in f.areas:
        if area.devices and backend.device not in area.devices:
            return file_decision(req.path, False, f"Dropped: {f.where} tests {'/'.join(area.devices).upper()}-only "
                                 f"features ({part}), and this backend's device is {backend.device!r}.",
                                 (f"{part}: area {area.label}, devices {', '.join(area.devices)}",
                                  f"backend device: {backend.device}"))
    return None


def scope_preference_include(req: ScopeRequest, f: PathFacts, backend: BackendContext,
                             wishes: Sequence[Wish]) -> FileDecision | None:
    hit = _matching(wishes, "include", f) or _matching(wishes, "only", f)
    if hit is None:
        return None
    wish, what = hit
    return file_decision(req.path, True, f"Kept: the {wish.quote()} asks for {wish.value}, which {what}.",
                         (wish.quote(), what))


def scope_preference_only(req: ScopeRequest, f: PathFacts, backend: BackendContext,
                          wishes: Sequence[Wish]) -> FileDecision | None:
    only = [w for w in wishes if w.polarity == "only"]
    if not only or not f.areas:
        return None  # an unknown area is not known to lie outside the "only" (rule unknown)
    part, area = f.areas[0]
    return file_decision(req.path, False, f"Dropped: the {only[0].quote()} limits the scope to "
                         f"{names(sorted({w.value for w in only}))}, and {f.where} is area {area.label} "
                         f"({'/'.join(area.hooks) or 'no hook'}).", (only[0].quote(), f"{part}: area {area.label}"))


def scope_tooling(req: ScopeRequest, f: PathFacts, backend: BackendContext,
                  wishes: Sequence[Wish]) -> FileDecision | None:
    for part, area in f.areas:
        if area.tooling:
            return file_decision(req.path, False, f"Dropped: {f.where} tests {area.tooling} ({part}), not behaviour "
                                 f"of the device.", (f"{part}: area {area.label}",))
    return None


def scope_empty(req: ScopeRequest, f: PathFacts, backend: BackendContext,
                wishes: Sequence[Wish]) -> FileDecision | None:
    if req.n_tests != 0 or req.sample_tests:
        return None
    return file_decision(req.path, False, f"Dropped: {f.where} defines no tests (n_tests=0).", ("n_tests: 0",))


def scope_hooks(req: ScopeRequest, f: PathFacts, backend: BackendContext,
                wishes: Sequence[Wish]) -> FileDecision | None:
    needing = [(part, area) for part, area in f.areas if area.hooks]
    if not needing:
        return None
    evidence = tuple(f"{part}: area {area.label}, hook {' or '.join(area.hooks)}" for part, area in needing)
    if f.hooks is None:
        return file_decision(req.path, True, f"Kept for review: {f.where} needs the {_hooks_phrase(needing)} hook, and "
                             f"the profile declares no hooks.", (*evidence, "profile hooks: none declared"),
                             needs_review=True, missing=("the backend's hooks in the profile",))
    lacking = [(part, area) for part, area in needing if not f.hooks & set(area.hooks)]
    if lacking:
        hooks = " or ".join(lacking[0][1].hooks)
        return file_decision(req.path, False, f"Dropped: {f.where} needs the {hooks} hook "
                             f"({HOOK_DESCRIPTIONS.get(lacking[0][1].hooks[0], '')}), which the backend does not "
                             f"implement.", (*evidence, f"backend hooks: {', '.join(sorted(f.hooks)) or 'none'}"))
    return file_decision(req.path, True, f"Kept: {f.where} exercises the {_hooks_phrase(needing)} hook "
                         f"({HOOK_DESCRIPTIONS.get(needing[-1][1].hooks[0], '')}), which the backend implements.",
                         (*evidence, f"backend hooks: {', '.join(sorted(f.hooks))}"))


def scope_device_generic(req: ScopeRequest, f: PathFacts, backend: BackendContext,
                         wishes: Sequence[Wish]) -> FileDecision | None:
    match = _DEVICE_GENERIC.search(req.summary)
    if match is None:
        return None
    evidence = (f"summary: {quote(match.group(0))}", f"n_tests: {req.n_tests}")
    if f.hooks is not None and "eager_ops" not in f.hooks:
        return file_decision(req.path, False, f"Dropped: {f.where} holds device-generic tests ({match.group(0)} in its "
                             "summary), which run eager ops, and the backend does not implement eager_ops.", evidence)
    return file_decision(req.path, True, f"Kept: {f.where} holds device-generic tests ({match.group(0)} in its "
                         "summary), which run on the backend without edits.", evidence)


def scope_unknown(req: ScopeRequest, f: PathFacts, backend: BackendContext,
                  wishes: Sequence[Wish]) -> FileDecision | None:
    tests = f"{req.n_tests} tests" if req.n_tests is not None else "an unknown number of tests"
    return file_decision(req.path, True, f"Kept for review: no rule maps {f.where} ({tests}) to a hook and its summary "
                         "does not show device-generic tests; the bucket stage looks at every test in it.",
                         (f"summary: {quote(req.summary) if req.summary else 'none'}", f"n_tests: {req.n_tests}"),
                         needs_review=True, missing=(f"which extension point {f.where} exercises",))


SCOPE_RULES: tuple[tuple[str, ScopeRule], ...] = (
    ("preference_exclude", scope_preference_exclude), ("other_device", scope_other_device),
    ("preference_include", scope_preference_include), ("preference_only", scope_preference_only),
    ("tooling", scope_tooling), ("empty", scope_empty), ("hooks", scope_hooks),
    ("device_generic", scope_device_generic), ("unknown", scope_unknown),
)


def decide_scope(req: ScopeRequest, backend: BackendContext, wishes: Sequence[Wish]) -> FileDecision:
    facts = path_facts(req.path, req.kind, effective_hooks(backend, wishes))
    for _, rule in SCOPE_RULES:
        record = rule(req, facts, backend, wishes)
        if record is not None:
            return record
    raise AssertionError("scope_unknown always decides")  # pragma: no cover


def _hooks_phrase(needing: Sequence[tuple[str, Area]]) -> str:
    return " and ".join(dict.fromkeys(" or ".join(area.hooks) for _, area in needing))
