"""The modes that note each call a test makes, for the capture (``capture.py``).

``recorder_class()``: a TorchDispatchMode that notes every aten overload and every distinct call
(overload + input dtypes, :func:`testcurator.plugin.callspec.call_key`) with one replayable example
per key and process, and the calls that raised (each also as its raising twin,
:func:`testcurator.plugin.callspec.raise_call`, with the raising inputs as its example).
``PythonCallRecorder``: wraps the few Tensor methods that branch on the device type in Python
below any aten op (callspec.PYTHON_CALLS), noting their calls into a dispatch recorder.
``ModuleCallRecorder``: notes each torch.nn module forward that returns as a module call
(callspec.MODULE_NAMESPACE) into a dispatch recorder.
torch is imported only when they are first asked for: the plugin loads in every pytest run.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from functools import lru_cache
from typing import Any

from testcurator.plugin.callspec import (PYTHON_CALLS, alias_roles, argument, call_key, example, module_call,
                                         python_call, raise_call, tensors_in, write_call)
from testcurator.plugin.oprecord import op_name

MAX_EXAMPLES = 20000  # distinct call keys per process that get an example (bounded memory)
NO_EXAMPLE = "\0no example"  # a call noted for its key only (its key has an example, or the budget is spent)


# Overloads whose ZeroTensor kernel segfaults when called under any TorchDispatchMode (torch
# 2.13, a bare mode too): gradcheck's undefined-tangent check (_test_undefined_forward_mode)
# calls them on efficient zero tangents, so upstream test_ops_fwd_gradients' float64
# forward-AD instances of add, addmm, addcdiv, ldexp & co. killed the capture's worker, 12
# times in OpenReg's cold corpus capture (each replacement worker collects the whole
# selection again). They are called on materialized zeros instead: the same values.
ZERO_TENSOR_SEGFAULTS = frozenset({"aten::mul.Scalar", "aten::add.Scalar"})


def _materialized(args: Any) -> Any:
    """``args`` with each efficient zero tensor replaced by an ordinary tensor of zeros."""
    import torch

    def plain(a: Any) -> Any:
        if isinstance(a, torch.Tensor) and torch._is_zerotensor(a):
            return torch.zeros(a.shape, dtype=a.dtype, device=a.device)
        return a

    return tuple(plain(a) for a in args)


MAX_VIEW_CHAIN = 8  # view calls remembered per view of a view of ... (the nearest ones)
_CREATION = os.path.join("torch", "testing", "_creation.py")


def _making_a_tensor() -> bool:
    """Whether the call comes from ``torch.testing.make_tensor``, which fills a complex tensor it
    makes through ``view_as_real``: random values, where a device whose view is a copy leaves
    the tensor as allocated. Upstream view tests that take such a tensor passed on OpenReg; a
    test that writes values into a view and reads them back through the base is what fails."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith(_CREATION):
            return True
        frame = frame.f_back
    return False


@lru_cache(maxsize=1)
def recorder_class() -> type:
    from torch import Tensor
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.weak import WeakIdKeyDictionary

    class OpRecorder(TorchDispatchMode):
        """Notes each op (overload object, hashable) and runs it unchanged."""

        # Without this, an eager torch.cond & co. under the mode raises NotImplementedError;
        # with it, the HOP itself is recorded and runs as usual.
        supports_higher_order_operators = True

        @classmethod
        def ignore_compile_internals(cls) -> bool:
            # Without this dynamo falls back to eager under any active mode; with it, a test
            # really compiles and plugin/compile_capture.py records the compiled graphs.
            return True

        def __init__(self, examples: dict[str, str | None] | None = None) -> None:
            super().__init__()
            self.seen: set[Any] = set()
            self.calls: set[str] = set()
            # The process's (shared by every test): one example per call key, the first seen.
            self.examples = {} if examples is None else examples
            self.new: dict[str, str] = {}
            # Keys of calls that raised, and of calls that returned: a key that only raised is a
            # call the test made to see it fail (OpRecord.raised).
            self.raised: set[str] = set()
            self.worked: set[str] = set()
            # Each live view the test's calls made -> the keys of the view calls it came through
            # (a view of a view: both), by identity: a write into it is noted (:meth:`_follow_views`).
            self._views: Any = WeakIdKeyDictionary()

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            self.seen.add(func)
            return self.run(op_name(func), func, args, kwargs or {})

        def run(self, name: str, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
            """Call ``func`` and note it as ``name`` (its key, example, and whether it raised)."""
            # Before the call: an in-place or out= op would change what its inputs looked like.
            pending = self._note(name, args, kwargs)
            if name in ZERO_TENSOR_SEGFAULTS:
                args = _materialized(args)
            try:
                out = func(*args, **kwargs)
            except BaseException as exc:
                if pending is not None:
                    self.raised.add(pending[0])
                    if isinstance(exc, Exception):
                        self._note_raise(pending, exc, args, kwargs)
                raise
            if pending is not None:
                self.worked.add(pending[0])
                self._follow_views(func, pending[0], args, kwargs, out)
            # Kept only once the call worked: a test of error handling (flip with a repeated
            # dim) makes calls that fail on CPU too, and an example the probe cannot replay on
            # CPU says nothing about the device; a later call of the same key may give one.
            if pending is not None and pending[1] is not NO_EXAMPLE:
                key, text = pending
                self.examples[key] = text
                if text is not None:
                    self.new[key] = text
            return out

        def _follow_views(self, func: Any, key: str, args: Any, kwargs: dict[str, Any], out: Any) -> None:
            """Remember the views ``func`` returned, and note a writing twin (callspec.write_call)
            for each view call whose result, or a view of it, ``func`` wrote into."""
            try:
                base, written = alias_roles(func)
                if base is not None:
                    source = argument(args, kwargs, base)
                    chain = (*self._views.get(source, ()), key)[-MAX_VIEW_CHAIN:] if isinstance(source, Tensor) else (key,)
                    for view in tensors_in(out):
                        self._views[view] = chain
                through = {call for where in written for target in tensors_in(argument(args, kwargs, where))
                           for call in self._views.get(target, ())}
            except Exception:  # a twin is evidence, never a reason to fail the test
                return
            if through and not _making_a_tensor():
                for call in through:
                    self._note_write(call)

        def _note_write(self, call: str) -> None:
            """Note ``call``'s writing twin, with ``call``'s example as its own."""
            twin = write_call(call)
            self.calls.add(twin)
            text = self.examples.get(call)
            if twin not in self.examples and isinstance(text, str) and len(self.examples) < MAX_EXAMPLES:
                self.examples[twin] = self.new[twin] = text

        def note(self, key: str, text: str) -> None:
            """Note a call that ran outside the dispatcher (a module's forward), with its example."""
            self.calls.add(key)
            self.worked.add(key)
            if key not in self.examples and len(self.examples) < MAX_EXAMPLES:
                self.examples[key] = self.new[key] = text

        def _note(self, name: str, args: Any, kwargs: dict[str, Any]) -> tuple[str, str | None] | None:
            """Record the call's key; its example (to keep if the call works), when its key has none
            yet (else :data:`NO_EXAMPLE`); None when the call has no key."""
            try:
                key = call_key(name, args, kwargs)
            except Exception:  # a key is evidence, never a reason to fail the test
                return None
            self.calls.add(key)
            if key in self.examples or len(self.examples) >= MAX_EXAMPLES:
                return key, NO_EXAMPLE
            return key, example(args, kwargs) if "::" in key and not key.startswith("higher_order::") else None

        def _note_raise(self, pending: tuple[str, str | None], error: Exception, args: Any, kwargs: dict[str, Any]) -> None:
            """Note a call that raised as its raising twin (callspec.raise_call), with these inputs
            as the twin's example: the probe replays them on the device to see whether it raises
            the same error (upstream test_polygamma_neg: polygamma's own check of n, before the
            kernel the device lacks)."""
            key, text = pending
            twin = raise_call(key, type(error).__name__, str(error))
            self.calls.add(twin)
            self.raised.add(twin)
            if "::" not in key or key.startswith("higher_order::") or twin in self.examples \
                    or len(self.examples) >= MAX_EXAMPLES:
                return
            # The inputs as the call got them (a check raises before it writes), encoded once.
            text = text if isinstance(text, str) and text is not NO_EXAMPLE else example(args, kwargs)
            self.examples[twin] = text
            if text is not None:
                self.new[twin] = text

    return OpRecorder


class PythonCallRecorder:
    """While entered, the Tensor methods of :data:`PYTHON_CALLS` note each call into a dispatch
    recorder (``recorder_class()``) and run unchanged.

    The methods are wrapped on ``torch.Tensor`` for the test's call phase, not seen through a
    TorchFunctionMode: with such a mode active every tensor "has a torch function", and code that
    takes a fast path only without one changes under it (upstream
    test_multihead_attention_fastpath_for_all_batchfirst failed on CPU and on the device, and
    passed under the mode)."""

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> PythonCallRecorder:
        import torch

        for name in PYTHON_CALLS:
            self._saved[name] = original = torch.Tensor.__dict__[name]
            setattr(torch.Tensor, name, self._wrapped(python_call(name), original))
        return self

    def __exit__(self, *exc: object) -> None:
        import torch

        for name, original in self._saved.items():
            setattr(torch.Tensor, name, original)
        self._saved.clear()

    def _wrapped(self, key: str, original: Any) -> Any:
        recorder = self.recorder

        @functools.wraps(original)
        def method(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            return recorder.run(key, original, (tensor, *args), kwargs)

        return method


# Containers run their children, whose own forwards are noted; they compute nothing themselves.
_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"})


@lru_cache(maxsize=None)
def nn_name(cls: type) -> str | None:
    """``torch.nn.GRUCell`` -> ``nn.GRUCell`` (the ModuleInfo name); None for a class torch.nn
    does not export (a test's own module) and for containers."""
    import torch.nn

    name = cls.__name__
    return f"nn.{name}" if getattr(torch.nn, name, None) is cls and name not in _CONTAINERS else None


def module_dtype(module: Any, args: Any) -> str | None:
    """The dtype a module computes in: its first floating or complex parameter's, else its first
    such input's."""
    import torch

    tensors = [*module.parameters(recurse=False), *(a for a in args if isinstance(a, torch.Tensor))]
    for t in tensors:
        if t.is_floating_point() or t.is_complex():
            return str(t.dtype).removeprefix("torch.")
    return None


class ModuleCallRecorder:
    """While entered, each torch.nn module forward that returns notes ``module::nn.X(dtype)`` into a
    dispatch recorder (``recorder_class()``), through a global forward hook: its example is the
    module's name and dtype, from which the probe builds it again (runner/probe/module_replay.py).
    A forward that raises notes nothing: a test of a module's errors does not run it."""

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder
        self._handle: Any = None

    def __enter__(self) -> ModuleCallRecorder:
        from torch.nn.modules.module import register_module_forward_hook

        self._handle = register_module_forward_hook(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def _hook(self, module: Any, args: Any, output: Any) -> None:
        try:
            name = nn_name(type(module))
            if name is None:
                return
            dtype = module_dtype(module, args)
            key = module_call(name, dtype)
            if key not in self.recorder.calls:  # a gradcheck runs the same forward thousands of times
                self.recorder.note(key, json.dumps({"module": name, "dtype": dtype}))
        except Exception:  # a note is evidence, never a reason to fail the test
            pass
