"""Map PyTorch's instantiated test names to their device-generic identity.

``instantiate_device_type_tests`` turns ``TestFoo.test_bar`` into
``TestFooCPU.test_bar_cpu_float32`` (``@dtypes``),
``TestFooCPU.test_bar_nn_functional_relu_cpu_float32`` (``@ops``) or
``TestFooCURATEDEV.test_bar_x_1_curatedev_float16`` (``@parametrize``, renamed
privateuse1). The config names tests by the generic ``Class::test`` only, so everything
downstream (plugin, memory, runner) goes through this module.

Two entry points: :func:`identify` works on live objects (the plugin at collection, which
sees ``param_kwargs``) and is exact; :func:`parse_name` works on strings alone (JUnit XML
from elsewhere) and needs the set of known generic names to split an op off a test name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from testcurator.installed import dtype_names
from testcurator.vocab import join_name, split_name

# ``Class::test`` for methods; a bare ``test_func`` for module-level pytest functions.
GENERIC_NAME_RE = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*::)?[A-Za-z_][A-Za-z0-9_]*$")
KNOWN_DEVICES = ("cpu", "cuda", "meta", "mps", "xpu", "hpu", "lazy", "mtia", "privateuse1")


@dataclass(frozen=True, slots=True)
class TestIdentity:
    """What one instantiated test is, in device-generic terms.

    Slotted: collection makes one per instance (25,000 on one OpInfo file)."""

    __test__ = False  # not a pytest test class, despite the name

    cls: str
    test: str
    device: str | None = None
    dtype: str | None = None
    op: str | None = None
    op_variant: str | None = None
    module: str | None = None
    params: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @property
    def generic(self) -> str:
        """``Class::test``; a module-level function (no class) is named by itself."""
        return join_name(self.cls, self.test)

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The dtypes of the instance: one, or each member of a dtype pair
        (``@dtypes(*product(...))``: ``complex128_bfloat16`` -> both), in order."""
        return split_dtypes(self.dtype)

    @property
    def op_formatted(self) -> str | None:
        """The op as it appears in test names and marks (``nn_functional_relu``)."""
        return None if self.op is None else formatted_op(self.op, self.op_variant)


def formatted_op(op: str, variant: str | None = None) -> str:
    """An OpInfo (and its variant) as test names spell it: ``div``, ``floor_rounding`` ->
    ``div_floor_rounding``; ``nn.functional.relu`` -> ``nn_functional_relu``."""
    base = op.replace(".", "_")
    return f"{base}_{variant}" if variant else base


#: An instance's ``@parametrize`` values: (argument, ``repr`` of the live value), sorted.
Params = tuple[tuple[str, str], ...]


def params_text(params: Params) -> str:
    """``params`` as one JSON object (``{"shape": "(2, 3)"}``): a JUnit property's value."""
    return json.dumps(dict(params), sort_keys=True)


def params_from(value: Any) -> Params:
    """Params back from what a record carried: a mapping, a list of pairs (JSON of a tuple),
    :func:`params_text`'s JSON text, or nothing (records written before params existed)."""
    if not value:
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(f"params: not a JSON object: {value[:80]!r}") from None
    items = value.items() if isinstance(value, Mapping) else value
    try:
        return tuple(sorted((str(k), str(v)) for k, v in items))
    except (TypeError, ValueError):
        raise ValueError(f"params: expected a mapping of argument to value, got {value!r:.80}") from None


def split_dtypes(dtype: str | None) -> tuple[str, ...]:
    """``float32`` -> (float32,); a dtype pair's ``complex128_bfloat16`` -> both members.

    Config rules (capabilities, edits), refine's separation and the rails read dtypes through
    this, so a rule that names one dtype applies to every instance that has it as a member.
    """
    if not dtype:
        return ()
    return (dtype,) if dtype in dtype_names() else tuple(dtype_parts(dtype))


def dtype_name(dtype: Any) -> str:
    """``torch.float32`` -> ``float32``; tuples (multi-dtype tests) join with ``_``."""
    if isinstance(dtype, (tuple, list)):
        return "_".join(dtype_name(d) for d in dtype)
    text = str(dtype)
    return text.split(".", 1)[1] if text.startswith("torch.") else text


def device_name(device: Any) -> str:
    """``'cuda:0'`` -> ``cuda``; lists (multi-device tests) keep their first."""
    if isinstance(device, (tuple, list)):
        device = device[0] if device else ""
    return str(device).split(":", 1)[0]


def _generic_test_name(fn: Callable[..., Any], attr_name: str) -> str | None:
    # Instantiation wraps with functools.wraps, so __name__ is the template's "test_bar"
    # whatever suffixes the attribute carries. The class comes from the collected class
    # (not __qualname__), so a test inherited from a mixin keeps the subclass's name.
    name = getattr(fn, "__name__", "") or ""
    if name.startswith("test") and attr_name.startswith(name):
        return name
    return None


def _param_kwargs(fn: Callable[..., Any]) -> Mapping[str, Any]:
    defaults = getattr(fn, "__defaults__", None) or ()
    if defaults and isinstance(defaults[0], dict):
        return defaults[0]
    return {}


def _identity_fields(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    params: list[tuple[str, str]] = []
    for key, value in kwargs.items():
        if key in ("device", "devices"):
            out["device"] = device_name(value)
        elif key in ("dtype", "dtypes"):
            # PyTorch stores a dtype pair (``@dtypes(*product(...))``) under the plural key.
            out["dtype"] = _dtype_name_of(value)
        elif key == "op" and (names := _opinfo_names(value)) is not None:
            out["op"], out["op_variant"] = names
        elif key == "module_info" and _is_moduleinfo(value):
            out["module"] = value.name
        else:
            # A plain ``@parametrize("op", ["add", ...])`` value is a parameter, not an OpInfo.
            params.append((key, repr(value)))
    out["params"] = tuple(sorted(params))
    return out


_DTYPE_NAMES: dict[Any, str] = {}


def _dtype_name_of(value: Any) -> str:
    """:func:`dtype_name`, remembered per dtype (or tuple of them): asked once per instance."""
    try:
        return _DTYPE_NAMES[value]
    except KeyError:
        name = _DTYPE_NAMES[value] = dtype_name(value)
        return name
    except TypeError:  # a list: not hashable, not remembered
        return dtype_name(value)


# An ``op`` value -> its (name, variant) if it is an OpInfo, by id (the value kept beside, so an
# id is never reused): every instance of an @ops test asks, and OpInfo's __getattribute__
# makes each attribute read cost.
_OPINFO_NAMES: dict[int, tuple[Any, tuple[str, str | None] | None]] = {}


def _opinfo_names(value: Any) -> tuple[str, str | None] | None:
    cached = _OPINFO_NAMES.get(id(value))
    if cached is None or cached[0] is not value:
        names = (value.name, getattr(value, "variant_test_name", "") or None) if _is_opinfo(value) else None
        cached = _OPINFO_NAMES[id(value)] = (value, names)
    return cached[1]


def _is_opinfo(value: Any) -> bool:
    # Duck-typed (importing OpInfo costs seconds) and never via str(value): OpInfo's
    # dataclass repr pretty-prints the whole record, which once dominated collection time.
    return isinstance(getattr(value, "name", None), str) and hasattr(value, "sample_inputs_func")


def _is_moduleinfo(value: Any) -> bool:
    return isinstance(getattr(value, "name", None), str) and hasattr(value, "module_inputs_func")


def identify(cls: type, attr_name: str, fn: Callable[..., Any] | None = None) -> TestIdentity:
    """Identity of ``cls.attr_name`` from the live objects (exact).

    The class attribute wins over ``fn``: pytest's ``item.obj`` for a TestCase method is
    re-wrapped by PyTorch's ``TestCase.__init__`` and has lost ``param_kwargs``.
    """
    fn = getattr(cls, attr_name, None) or fn
    device_type = getattr(cls, "device_type", None)
    gtest = _generic_test_name(fn, attr_name) if fn is not None else None
    if gtest is None:
        return parse_name(cls.__name__, attr_name, devices=_devices_for(device_type))
    gcls, class_device = _class_device(cls.__name__, device_type)
    fields = _identity_fields(_param_kwargs(fn))
    if "device" not in fields and (class_device or device_type):
        fields["device"] = str(class_device or device_type)
    return TestIdentity(cls=gcls, test=gtest, **fields)


def generic_classes(cls: type) -> frozenset[str]:
    """The class names :func:`identify` can give the tests of ``cls``: a device-generic class
    loses its device suffix; a plain one keeps its name, or loses a device-like suffix when
    a test's name is read from the string (no generic function behind it)."""
    device_type = getattr(cls, "device_type", None)
    devices = _devices_for(device_type)
    return frozenset({split_device_class(cls.__name__, devices if device_type else ())[0],
                      split_device_class(cls.__name__, devices)[0]})


@lru_cache(maxsize=4096)
def _class_device(cls_name: str, device_type: str | None) -> tuple[str, str | None]:
    # Cached: every instantiated test of a class asks the same question at collection.
    return split_device_class(cls_name, _devices_for(device_type) if device_type else ())


def _devices_for(device_type: str | None) -> tuple[str, ...]:
    return (str(device_type),) + KNOWN_DEVICES if device_type else KNOWN_DEVICES


def split_device_class(cls_name: str, devices: Collection[str] = KNOWN_DEVICES) -> tuple[str, str | None]:
    """``TestFooCPU`` -> (``TestFoo``, ``cpu``); a plain class keeps its name."""
    return _split_device_class(cls_name, tuple(devices))


@lru_cache(maxsize=4096)
def _split_device_class(cls_name: str, devices: tuple[str, ...]) -> tuple[str, str | None]:
    # Cached: every instantiated test of a class asks the same question at collection.
    for dev in sorted(devices, key=len, reverse=True):
        suffix = dev.upper()
        if cls_name.endswith(suffix) and len(cls_name) > len(suffix):
            return cls_name[: -len(suffix)], dev
    return cls_name, None


def parse_name(
    cls_name: str,
    test_name: str,
    *,
    known_tests: Collection[str] | None = None,
    devices: Collection[str] = KNOWN_DEVICES,
) -> TestIdentity:
    """Identity from strings only, e.g. from JUnit XML produced elsewhere.

    ``known_tests`` (generic ``Class::test`` names, e.g. from memory) lets the longest
    known test name win, so ``test_bar_nn_functional_relu`` splits into ``test_bar`` and
    the op ``nn_functional_relu``. Without it, only device and dtype are stripped.
    """
    gcls, device = split_device_class(cls_name, devices)
    rest, dtype = test_name, None
    if device is not None:
        rest, dtype = _strip_device_dtype(test_name, device)
    op = None
    if known_tests:
        base = _longest_known(gcls, rest, known_tests)
        if base is not None and base != rest:
            op = rest[len(base) + 1 :]
            rest = base
    return TestIdentity(cls=gcls, test=rest, device=device, dtype=dtype, op=op)


def _strip_device_dtype(test_name: str, device: str) -> tuple[str, str | None]:
    marker = f"_{device}"
    idx = test_name.rfind(marker + "_")
    if idx > 0:
        tail = test_name[idx + len(marker) + 1 :]
        if tail in dtype_names() or all(p in dtype_names() for p in dtype_parts(tail)):
            return test_name[:idx], tail
    if test_name.endswith(marker):
        return test_name[: -len(marker)], None
    return test_name, None


def dtype_parts(tail: str) -> list[str]:
    """Split a dtype suffix into dtype names; a non-dtype tail comes back unsplit + NUL."""
    # Multi-dtype suffixes ("float32_int64") split on "_" only where both halves are dtypes;
    # float8_e4m3fn itself contains "_", so try the greedy split.
    parts: list[str] = []
    pieces = tail.split("_")
    i = 0
    while i < len(pieces):
        for j in range(len(pieces), i, -1):
            cand = "_".join(pieces[i:j])
            if cand in dtype_names():
                parts.append(cand)
                i = j
                break
        else:
            return [tail + "\0"]  # not a dtype suffix
    return parts


def _longest_known(gcls: str, rest: str, known_tests: Collection[str]) -> str | None:
    best = None
    for known in known_tests:
        kcls, ktest = split_name(known)
        if not kcls or kcls != gcls:  # a module-level function has no op suffix to split off
            continue
        if rest == ktest or rest.startswith(ktest + "_"):
            if best is None or len(ktest) > len(best):
                best = ktest
    return best


def is_generic_name(name: str) -> bool:
    """True when ``name`` is ``Class::test`` or a bare function name (no path, no parameters)."""
    return bool(GENERIC_NAME_RE.match(name))


def instantiated_hint(
    name: str, *, known_tests: Collection[str] = (), variant_names: Collection[str] = ()
) -> str | None:
    """If ``name`` looks like an instantiated name (``TestFooCPU::test_bar_cpu_float32``),
    the generic name it most likely stands for; else None.

    Device and dtype suffixes come off by themselves; what lies between the test and the
    device (an OpInfo, a ModuleInfo, ``@parametrize`` values) needs knowledge:
    ``known_tests`` (generic ``Class::test`` names defined upstream: the longest one that
    prefixes the name wins, the exact answer) or else ``variant_names`` (OpInfo/ModuleInfo
    names as formatted in test names, ``nn_functional_relu``: the longest that ends the
    name is cut off). Without either, only the suffixes are stripped.
    """
    cls, test = split_name(name)
    if not cls:
        return None
    gcls, device = split_device_class(cls)
    if device is None:
        return None
    gtest, _ = _strip_device_dtype(test, device)
    if gtest == test:
        return None
    if known_tests:
        base = _longest_known(gcls, gtest, known_tests)
        if base is not None:
            return join_name(gcls, base)
    # @modules tests of modules that differ in training carry _train_mode/_eval_mode last.
    stem = next((gtest[: -len(m)] for m in _MODE_SUFFIXES if gtest.endswith(m)), gtest)
    for variant in sorted(variant_names, key=len, reverse=True):
        if stem.endswith("_" + variant) and len(stem) - len(variant) - 1 > len("test"):
            return join_name(gcls, stem[: -len(variant) - 1])
    return join_name(gcls, gtest)


_MODE_SUFFIXES = ("_train_mode", "_eval_mode")


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 variant``, ``3 variants``: a count in words, never ``1 variant(s)``."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def every(n: int, noun: str, plural: str | None = None) -> str:
    """``the only variant``, ``all 3 variants``: what a reason says of all of them."""
    return f"the only {noun}" if n == 1 else f"all {n} {plural or noun + 's'}"
