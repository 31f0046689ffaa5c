"""The offline brain's shared vocabulary: the preference grammar, record builders and how
a test's text shows the features it needs. The rules themselves are in
agents/offline/scope.py, agents/offline/bucket.py and agents/offline/refine.py; their tables
are in agents/offline/brain.py.

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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from testcurator.agents.brain import BackendContext
from testcurator.agents.decision import Decision, FileDecision
from testcurator.vocab import Mode, op_words


BRAIN = "offline"
# prompt_hash of every offline record: a hash of this version string, so a report or cache
# tells which rule set decided. Bump it whenever a rule's outcome changes.
#: How a decision's evidence says that the capture saw the test fail on CPU, the reference
#: device (bucket states it, refine keeps it beside the device's own failure).
CPU_FAILED = "capture on CPU: "

# 2: the probe rule (agents/offline/probe.py); 3: exclude_params; 4: fails on CPU too, sparse_dim is no need;
# 5: partly fails on CPU too; 6: a crashing OpInfo op is excluded, not the whole test skipped;
# 8: a test that never uses its device is not held to the probe's gaps; 9: an OpInfo's instance of a
# dtype the device lacks does not clear the op's gaps for the others (memory/capability.py), and a
# test whose CPU failures are all left out by its edits is not xfailed for them; 10: refine excludes an
# @ops op at the one dtype it failed in where no dtype and no op alone separates the failures; 12: refine
# keeps upstream's expected failures beside passes, and a test naming only the CPU outright never uses its device
RULES_VERSION = "offline-rules/12"
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

# Values that differ from one process to the next (memory addresses, as data_ptr() prints them
# in decimal or hex): quoted as they were, a reason would change every night with nothing changed.
_VOLATILE = re.compile(r"\b0x[0-9a-fA-F]{8,}\b|\b\d{12,}\b")
# unittest's own summary inside a quoted failure ("Ran 1 test in 0.008s"): the time differs in
# every run, and a reason that quotes it changed the config with nothing else changed (test_testing
# on OpenReg).
_ELAPSED = re.compile(r"\bin \d+\.\d+s\b")


def steady(text: str) -> str:
    """``text`` single-spaced, with memory addresses as ``<address>`` and elapsed times as
    ``in <time>``: what a reason quotes, and what the reason check compares a quote with
    (pipelines/reason_check.py)."""
    return _ELAPSED.sub("in <time>", _VOLATILE.sub("<address>", " ".join(text.split())))


def quote(text: str, limit: int = MAX_QUOTE) -> str:
    """One line of evidence, single-spaced and cut, in backquotes (messages hold both
    kinds of quotes: ``"aten::add.out" not implemented for 'Double'``)."""
    line = steady(next((ln.strip() for ln in text.splitlines() if ln.strip()), ""))
    return f"`{line if len(line) <= limit else line[: limit - 3] + '...'}`"


def names(items: Iterable[str], limit: int = 6) -> str:
    items = list(items)
    head = ", ".join(items[:limit])
    return head + (f" and {len(items) - limit} more" if len(items) > limit else "")


def excluded_words(dtypes: Iterable[str], ops: Iterable[str], modules: Iterable[str], *more: str) -> str:
    """``dtypes float16 and ops add, masked.std in complex64 and modules nn.Linear`` (each
    part only when it has names; ``more`` are further parts, already worded)."""
    dtypes, ops, modules = sorted(dtypes), sorted(ops), sorted(modules)
    parts = (f"dtypes {', '.join(dtypes)}" if dtypes else "", f"ops {op_words(ops)}" if ops else "",
             f"modules {', '.join(modules)}" if modules else "", *more)
    return " and ".join(p for p in parts if p)


def decision(test: str, mode: Mode, reason: str, evidence: Iterable[str], *, needs_review: bool = False,
             missing: Iterable[str] = (), exclude_dtypes: Iterable[str] = (),
             exclude_ops: Iterable[str] = (), exclude_modules: Iterable[str] = (),
             exclude_params: Iterable[str] = ()) -> Decision:
    return Decision(test=test, mode=mode, reason=reason, evidence=tuple(evidence), brain=BRAIN,
                    prompt_hash=RULES_HASH, needs_review=needs_review, missing=tuple(missing),
                    exclude_dtypes=tuple(sorted(set(exclude_dtypes))), exclude_ops=tuple(sorted(set(exclude_ops))),
                    exclude_modules=tuple(sorted(set(exclude_modules))), exclude_params=tuple(sorted(set(exclude_params))))


def file_decision(path: str, keep: bool, reason: str, evidence: Iterable[str], *, needs_review: bool = False,
                  missing: Iterable[str] = ()) -> FileDecision:
    return FileDecision(path=path, keep=keep, reason=reason, evidence=tuple(evidence), brain=BRAIN,
                        prompt_hash=RULES_HASH, needs_review=needs_review, missing=tuple(missing))


MODE_WORD = {"mandatory_success": "Mandatory success", "xfail": "Xfail", "xfail_strict": "Xfail strict",
             "skip": "Skip"}


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
            # sparse_dim/dense_dim answer for dense tensors too (0): a query, not a sparse tensor.
            # A call with a sparse tensor shows it in its key (``aten::clone[sparse_coo]``): a
            # test that makes one through a dense op (``sparse=True``) shows it only there.
            None, _re(r"^aten::(_?sparse_(?!dim\b)|to_sparse|_to_sparse)|\[sparse_")),
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

