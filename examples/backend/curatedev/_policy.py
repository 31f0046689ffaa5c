"""Run-time allowlists: which ops and dtypes curatedev "supports".

Entries are parsed here and pushed to the C++ fallback, which does the matching
on every call. Env vars give the values at import; the setters change them later.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import ModuleType

import torch

OPS_ENV = "CURATEDEV_ALLOWED_OPS"
DTYPES_ENV = "CURATEDEV_ALLOWED_DTYPES"
LOW_PRECISION_ENV = "CURATEDEV_LOW_PRECISION_OPS"
ALL = "*"

# What a backend "supports" when no env var says otherwise (mirrored in
# backend.yaml): elementwise arithmetic and a few reductions.
DEFAULT_OPS = (
    "add", "sub", "mul", "div", "neg", "abs", "exp", "log", "sqrt", "rsqrt",
    "sin", "cos", "tanh", "sigmoid", "relu", "clamp", "maximum", "minimum",
    "sum", "mean", "mm", "addmm", "bmm", "eq", "ne", "lt", "le", "gt", "ge",
    "where", "cat",
)
# What torch.testing needs to compare two curatedev tensors on the device
# (assertEqual / assert_close): part of DEFAULT_OPS; add them to any custom
# allowlist whose tests compare on the device rather than on CPU.
COMPARISON_OPS = (
    "eq", "ne", "le", "abs", "add", "sub", "mul", "isnan", "bitwise_and",
    "bitwise_or", "all",
)
DEFAULT_OPS = DEFAULT_OPS + tuple(o for o in COMPARISON_OPS if o not in DEFAULT_OPS)
DEFAULT_DTYPES = ("float32", "float16", "bfloat16", "int32", "int64", "bool")

# Ops that build or move inputs: always allowed (and never dtype-checked) so a
# test fails at the op under test, not while making its arguments. Printing
# and torch.testing comparisons move tensors to CPU through these as well.
CONSTRUCTION_OPS = (
    "empty", "empty_strided", "empty_like", "zeros", "ones", "full", "arange",
    "copy_", "_copy_from", "_copy_from_and_resize", "_to_copy", "clone",
    "fill_", "zero_", "uniform_", "normal_", "random_", "bernoulli_",
    "exponential_", "randint", "randn", "rand", "set_", "resize_",
    "_local_scalar_dense", "as_strided", "view", "_reshape_alias", "detach",
    "alias", "lift_fresh", "_unsafe_view",
    "_conj", "_neg_view", "resolve_conj", "resolve_neg",
)


class PolicyError(ValueError):
    """A malformed allowlist entry; names the source (env var or setter)."""

    def __init__(self, source: str, entry: str, why: str) -> None:
        super().__init__(f"{source}: bad entry {entry!r}: {why}")
        self.source = source
        self.entry = entry


@dataclass
class Policy:
    """The current allowlists, as the user wrote them (for allowed_ops())."""

    ops: tuple[str, ...] = DEFAULT_OPS
    dtypes: tuple[torch.dtype, ...] = ()
    all_dtypes: bool = False
    low_precision: tuple[str, ...] = ()
    ext: ModuleType | None = field(default=None, repr=False)


def split_entries(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def qualify(entry: str) -> str:
    """'add.Tensor' -> 'aten::add.Tensor'; other namespaces kept."""
    return entry if "::" in entry else f"aten::{entry}"


def _arg_key(schema: torch._C.FunctionSchema) -> tuple[tuple[str, str], ...]:
    return tuple((a.name, str(a.type)) for a in schema.arguments if not a.is_out)


def expand_overload(entry: str, source: str) -> list[str]:
    """One functional overload -> it plus its in-place and out= siblings.

    Structured ops reach a backend without own kernels through their out=
    overload (add.Tensor runs aten::add.out), so naming the functional form must
    admit the siblings with the same non-out arguments.
    """
    name, _, overload = qualify(entry).partition(".")
    schemas = {s.overload_name: s for s in torch._C._jit_get_schemas_for_operator(name)}
    if overload not in schemas:
        raise PolicyError(source, entry, f"no overload {overload!r} of {name}")
    key = _arg_key(schemas[overload])
    found = [f"{name}.{overload}"]
    for base in (name, f"{name}_"):
        for sibling in torch._C._jit_get_schemas_for_operator(base):
            if _arg_key(sibling) == key:
                found.append(f"{base}.{sibling.overload_name}" if sibling.overload_name else base)
    return sorted(set(found))


def split_names(entries: Iterable[str], source: str) -> tuple[list[str], list[str]]:
    """Entries -> (full overload names, base names), both namespace-qualified."""
    names: list[str] = []
    bases: list[str] = []
    for entry in entries:
        if "." in entry.split("::")[-1]:
            names.extend(expand_overload(entry, source))
        else:
            bases.append(qualify(entry))
    return names, bases


def parse_dtype(name: str, source: str) -> torch.dtype:
    value = getattr(torch, name.strip().removeprefix("torch."), None)
    if not isinstance(value, torch.dtype):
        raise PolicyError(source, name, "not a torch dtype name (e.g. float32, bfloat16)")
    return value


def push_ops(policy: Policy, entries: Iterable[str], source: str) -> None:
    assert policy.ext is not None
    listed = tuple(entries)
    everything = ALL in listed
    names, bases = split_names([e for e in listed if e != ALL], source)
    policy.ext.set_ops(everything, names, bases)
    policy.ops = listed


def push_dtypes(policy: Policy, entries: Iterable[str | torch.dtype], source: str) -> None:
    assert policy.ext is not None
    listed = list(entries)
    everything = ALL in listed
    dtypes = tuple(
        e if isinstance(e, torch.dtype) else parse_dtype(e, source) for e in listed if e != ALL
    )
    policy.ext.set_dtypes(everything, list(dtypes))
    policy.dtypes, policy.all_dtypes = dtypes, everything


def push_low_precision(policy: Policy, entries: Iterable[str], source: str) -> None:
    assert policy.ext is not None
    listed = tuple(entries)
    names, bases = split_names(listed, source)
    policy.ext.set_low_precision(names, bases)
    policy.low_precision = listed


def configure_from_env(policy: Policy, ext: ModuleType) -> None:
    """Install the construction ops and the env-var (or default) allowlists."""
    policy.ext = ext
    names, bases = split_names(CONSTRUCTION_OPS, "curatedev construction ops")
    ext.set_always(names, bases)
    ops = os.environ.get(OPS_ENV)
    push_ops(policy, DEFAULT_OPS if ops is None else split_entries(ops), OPS_ENV)
    dtypes = os.environ.get(DTYPES_ENV)
    push_dtypes(policy, DEFAULT_DTYPES if dtypes is None else split_entries(dtypes), DTYPES_ENV)
    push_low_precision(policy, split_entries(os.environ.get(LOW_PRECISION_ENV, "")), LOW_PRECISION_ENV)
