"""The offline brain's vocabulary and its scope rules: the preference grammar, record
builders, how a test's text shows the features it needs, and the areas of the upstream
test tree with the stage-1 rules over them. The rule tables are in agents/offline.py.

Preference grammar (plain-language ``preferences`` of the backend profile). A preference
is cut into clauses at ``;``, ``:``, a sentence-ending ``.``, ``but`` and ``while``. In a
clause, phrases are found longest first:

* triggers: ``exclude`` (skip, no, not, ignore, exclude, drop, without, avoid, don't, does
  not, not supported, unsupported, out of scope, not interested in), ``include`` (focus on,
  include, keep, prioritise, care about, matter(s) (most), important, in scope, and the
  double negations don't/do not skip|ignore), ``only`` (only);
* targets: a hook (``eager ops``, ``views``, ``autograd``, ``torch.compile``, ``inductor``,
  ``distributed``, ``sparse``, ``quantized``, ``complex``, ``nested``, ``jit``/``TorchScript``,
  ``export``, ``onnx``, ``amp``/``autocast``, ``fft``, ``linalg``, ``random``,
  ``serialisation``, ``profiler``), an area (``cuda``/``cuda-only``, ``mps``, ``xpu``,
  ``multiprocessing``, ``multi-device``, ``fx``, ``functorch``, ``double backward``), a dtype
  (``float64``/``double``, ``half``, ``bfloat16``, ``complex64``, ``int8``...), or a path
  (``test_foo.py``, ``foo/``).

Each target takes the polarity of the nearest trigger before it in its clause, else of the
first trigger after it ("Serialisation ... are out of scope"). Clauses without a trigger,
and words outside the vocabulary, are ignored. Examples: "No torch.compile / inductor, no
distributed" excludes compile, inductor and distributed; "Eager operator correctness
matters most" includes eager_ops; "only eager ops" restricts scope to eager_ops.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from testcurator.agents.brain import BackendContext, ScopeRequest
from testcurator.agents.decision import Decision, FileDecision
from testcurator.config.profile import HOOK_DESCRIPTIONS
from testcurator.config.schema import Mode

BRAIN = "offline"
# prompt_hash of every offline record: a hash of this version string, so a report or cache
# tells which rule set decided. Bump it whenever a rule's outcome changes.
RULES_VERSION = "offline-rules/1"
RULES_HASH = "offline-" + hashlib.sha256(RULES_VERSION.encode()).hexdigest()[:16]
MAX_QUOTE = 160

Polarity = Literal["exclude", "include", "only"]

_TRIGGERS: dict[str, Polarity] = {
    **dict.fromkeys(("don't skip", "do not skip", "don't ignore", "do not ignore", "focus on", "focus", "include",
                     "keep", "prioritise", "prioritize", "care about", "matters most", "matter most", "matters",
                     "matter", "important", "in scope"), "include"),
    **dict.fromkeys(("out of scope", "not supported", "unsupported", "not interested in", "skip", "ignore",
                     "exclude", "drop", "without", "avoid", "don't", "does not", "do not", "not", "no"), "exclude"),
    "only": "only",
}
HOOK_WORDS: dict[str, tuple[str, ...]] = {
    "eager_ops": ("eager ops", "eager operators", "eager operator", "eager", "operator correctness", "views",
                  "view ops", "in-place ops", "in-place", "inplace", "opinfo"),
    "autograd": ("autograd", "gradients", "gradient", "gradcheck", "backward"),
    "compile": ("torch.compile", "compile", "compiled", "dynamo", "torchdynamo"),
    "inductor": ("inductor", "torchinductor"), "distributed": ("distributed", "c10d", "collectives"),
    "sparse": ("sparse",), "quantized": ("quantized", "quantization"), "complex": ("complex",),
    "nested": ("nested", "jagged"), "jit": ("jit", "torchscript"), "export": ("torch.export", "export"),
    "onnx": ("onnx",), "amp": ("amp", "autocast", "mixed precision"), "fft": ("fft", "spectral"),
    "linalg": ("linalg", "linear algebra"), "random": ("random", "rng", "distributions"),
    "serialization": ("serialization", "serialisation", "torch.save"), "profiler": ("profiler", "profiling"),
}
AREA_WORDS: dict[str, tuple[str, ...]] = {
    "cuda": ("cuda-only", "cuda"), "mps": ("mps",), "xpu": ("xpu",), "multiprocessing": ("multiprocessing",),
    "multi_device": ("multi-device", "multi device", "multi-gpu", "multiple devices"), "fx": ("torch.fx", "fx"),
    "functorch": ("functorch", "vmap"), "double_backward": ("double backward", "gradgrad", "second-order gradients"),
}
DTYPE_WORDS: dict[str, tuple[str, ...]] = {
    "float64": ("float64", "double"), "float16": ("float16", "half"), "bfloat16": ("bfloat16",),
    "float32": ("float32",), "complex32": ("complex32",), "complex64": ("complex64",),
    "complex128": ("complex128",), "int8": ("int8",), "uint8": ("uint8",), "int16": ("int16",),
    "int32": ("int32",), "int64": ("int64",), "bool": ("bool",),
}
COMPLEX_DTYPES = frozenset({"complex32", "complex64", "complex128", "chalf", "cfloat", "cdouble"})
QUANTIZED_DTYPES = frozenset({"qint8", "quint8", "qint32", "quint4x2", "quint2x4"})


@dataclass(frozen=True)
class Wish:
    """One target of one preference: what it names (``kind``/``value``) and how."""

    polarity: Polarity
    kind: Literal["hook", "area", "dtype", "path"]
    value: str
    text: str  # the whole preference, quoted in reasons

    def quote(self) -> str:
        return f"preference {quote(self.text)}"


def _vocabulary() -> dict[str, tuple[str, str]]:
    vocab: dict[str, tuple[str, str]] = {}
    for kind, table in (("dtype", DTYPE_WORDS), ("area", AREA_WORDS), ("hook", HOOK_WORDS)):
        for value, words in table.items():
            vocab.update({w: (kind, value) for w in words})
    return vocab


_VOCAB = _vocabulary()
_PHRASES = sorted({*_TRIGGERS, *_VOCAB}, key=len, reverse=True)
# Longest phrase first at each position; a path token is any test_* name or folder/.
_TOKEN = re.compile(r"(?<![\w.])(?:(?P<path>test_\w+(?:\.py)?|\w+/)|(?P<word>"
                    + "|".join(re.escape(p) for p in _PHRASES) + r"))(?![\w])")
_CLAUSE = re.compile(r"[;:]|\.(?=\s|$)|\bbut\b|\bwhile\b")


def parse_preferences(preferences: Iterable[str]) -> tuple[Wish, ...]:
    """Every wish the preferences express, in order (see the module docstring)."""
    wishes: list[Wish] = []
    for text in preferences:
        for clause in _CLAUSE.split(text.lower().replace("\u2019", "'")):
            tokens = [(m.group("path"), None) if m.group("path") else (None, m.group("word"))
                      for m in _TOKEN.finditer(clause)]
            triggers = [(i, _TRIGGERS[w]) for i, (_, w) in enumerate(tokens) if w in _TRIGGERS]
            if not triggers:
                continue
            for i, (path, word) in enumerate(tokens):
                if word in _TRIGGERS:
                    continue
                before = [p for j, p in triggers if j < i]
                polarity = before[-1] if before else triggers[0][1]
                kind, value = ("path", path.rstrip("/")) if path else _VOCAB[word]  # type: ignore[index]
                wishes.append(Wish(polarity, kind, value, text))  # type: ignore[arg-type]
    return tuple(wishes)


def wishes_for(wishes: Sequence[Wish], polarity: Polarity, kind: str) -> dict[str, Wish]:
    """value -> first wish of that polarity and kind."""
    out: dict[str, Wish] = {}
    for wish in wishes:
        if wish.polarity == polarity and wish.kind == kind:
            out.setdefault(wish.value, wish)
    return out


def effective_hooks(backend: BackendContext, wishes: Sequence[Wish]) -> frozenset[str] | None:
    """Hooks the backend implements, as the team's wishes adjust them: declared plus
    included, minus excluded. None when the profile declares no hooks (nothing inferred)."""
    if not backend.hooks:
        return None
    return (frozenset(backend.hooks) | set(wishes_for(wishes, "include", "hook"))) - set(
        wishes_for(wishes, "exclude", "hook"))


# --- records ----------------------------------------------------------------------------

def quote(text: str, limit: int = MAX_QUOTE) -> str:
    """One line of evidence, single-spaced and cut, in backquotes (messages hold both
    kinds of quotes: ``"aten::add.out" not implemented for 'Double'``)."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = " ".join(line.split())
    return f"`{line if len(line) <= limit else line[: limit - 3] + '...'}`"


def names(items: Iterable[str], limit: int = 6) -> str:
    items = list(items)
    head = ", ".join(items[:limit])
    return head + (f" and {len(items) - limit} more" if len(items) > limit else "")


def decision(test: str, mode: Mode, reason: str, evidence: Iterable[str], *, needs_review: bool = False,
             missing: Iterable[str] = (), exclude_dtypes: Iterable[str] = (),
             exclude_ops: Iterable[str] = ()) -> Decision:
    return Decision(test=test, mode=mode, reason=reason, evidence=tuple(evidence), brain=BRAIN,
                    prompt_hash=RULES_HASH, needs_review=needs_review, missing=tuple(missing),
                    exclude_dtypes=tuple(sorted(set(exclude_dtypes))), exclude_ops=tuple(sorted(set(exclude_ops))))


def file_decision(path: str, keep: bool, reason: str, evidence: Iterable[str], *, needs_review: bool = False,
                  missing: Iterable[str] = ()) -> FileDecision:
    return FileDecision(path=path, keep=keep, reason=reason, evidence=tuple(evidence), brain=BRAIN,
                        prompt_hash=RULES_HASH, needs_review=needs_review, missing=tuple(missing))


# --- features a test needs --------------------------------------------------------------

@dataclass(frozen=True)
class Feature:
    """A hook (or area) a test needs, recognised in its decorators, source and summary
    (``text``), its name, or the ATen ops it called."""

    need: str
    text: re.Pattern[str]
    name: re.Pattern[str] | None = None
    aten: re.Pattern[str] | None = None


def _re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


FEATURES: tuple[Feature, ...] = (
    Feature("double_backward", _re(r"\bgradgradcheck\b|create_graph=True"), _re(r"gradgrad|fwgrad_bwgrad")),
    Feature("autograd", _re(r"\b(grad)?gradcheck\(|\.backward\(|\bautograd\.(grad|backward|Function)\b"
                            r"|requires_grad=True|\brequires_grad_\(\)"),
            _re(r"^Test(Fwd)?Gradients::|^TestAutograd|::test_\w*grad\b|::test_forward_mode_AD"), _re(r"_backward\b")),
    Feature("inductor", _re(r"\btorch\._inductor\b|\bcompile_fx\b")),
    Feature("compile", _re(r"\btorch\.compile\(|@torch\.compile\b|\btorch\._dynamo\b|\bmake_fx\(")),
    Feature("distributed", _re(r"\btorch\.distributed\b|\bdist\.init_process_group\b|\bc10d\b|\bProcessGroup\w*\(")),
    Feature("sparse", _re(r"\.to_sparse(_\w+)?\(|\bsparse_(coo|csr|csc|bsr|bsc)_tensor\(|\btorch\.sparse_(coo|csr)\b"),
            None, _re(r"^aten::(_?sparse_|to_sparse|_to_sparse)")),
    Feature("quantized", _re(r"\bquantize_per_(tensor|channel)\b|\btorch\.ao\.quantization\b|\btorch\.q(u)?int\d"),
            None, _re(r"^aten::(quantize_per_|dequantize|q_|_make_per_)")),
    Feature("nested", _re(r"\btorch\.nested\.|\bnested_tensor\(|\bNestedTensor\b"), None, _re(r"^aten::_nested")),
    Feature("jit", _re(r"\btorch\.jit\.(script|trace)\b|@torch\.jit\.script\b")),
    Feature("export", _re(r"\btorch\.export\b")),
    Feature("onnx", _re(r"\btorch\.onnx\b")),
    Feature("amp", _re(r"\btorch\.autocast\(|\btorch\.(\w+\.)?amp\.|\bautocast\(")),
    Feature("complex", _re(r"\btorch\.(cfloat|cdouble|chalf|complex(32|64|128))\b|\bview_as_complex\b")),
)


def needed_features(test: str, text: str, aten_ops: Sequence[str], *, dtypes_listed: bool) -> dict[str, str]:
    """need -> the evidence that shows it (first match wins per need). Complex dtypes of a
    dtype-parametrized test are left to dtype exclusion, not read as a need."""
    found: dict[str, str] = {}
    for feature in FEATURES:
        if feature.need == "complex" and dtypes_listed:
            continue
        match = feature.text.search(text)
        if match:
            line = text[text.rfind("\n", 0, match.start()) + 1:].split("\n", 1)[0]
            found[feature.need] = f"source: {quote(line)}"
        elif feature.name is not None and feature.name.search(test):
            found[feature.need] = f"name: {test}"
        elif feature.aten is not None:
            hit = next((op for op in aten_ops if feature.aten.search(op)), None)
            if hit:
                found[feature.need] = f"captured op: {hit}"
    return found


# --- scope: areas of the upstream test tree ---------------------------------------------

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
                  wishes: Sequence[Wish]) -> FileDecisionNone:
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
