"""Traces the calls of the implementation under test, for ``--repro-dir``
(conformance/report/repro.py).

While a test runs with a trace active, ``Impl.__call__`` goes through ``Trace.call``: the
arguments are copied to the CPU before the call (in-place implementations change them), the
outputs after it, and a hook on each differentiable output keeps the cotangent a backward
sends into it (and one on each input that requires grad keeps its gradient, also under
``torch.autograd.grad``). An area may attach to a call how the script re-checks it
(conformance/harness/recheck.py); without that, a failed elementwise check finds the call
whose output (or an input's gradient) is exactly the array it compared. Tracing never
changes a result: anything it cannot copy (a FakeTensor under export, a call during graph
capture or compilation, inputs over ``MAX_BYTES``) is left untraced.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from conformance.harness.tensors import exact_numpy

KEEP_CALLS = 2  # the newest calls kept per test
MAX_BYTES = 8 << 20  # a call whose input tensors exceed this is not copied


class Unrepresentable(Exception):
    """An argument the standalone script cannot rebuild."""


@dataclass
class Call:
    args_src: str = ""  # Python source of ``(args, kwargs)`` with tensors as T[i]
    tensors: list[torch.Tensor] = field(default_factory=list)  # CPU copies, before the call
    generators: list[torch.Tensor] = field(default_factory=list)  # their states at the call
    # T index -> (size, stride, storage offset) of a non-contiguous input, whose copy is then
    # its whole storage (the script rebuilds the view, so a stride bug reproduces)
    layouts: dict[int, list[list[int] | int]] = field(default_factory=dict)
    grad_inputs: list[int] = field(default_factory=list)  # T indices that required grad
    leaves: dict[int, torch.Tensor] = field(default_factory=dict)  # T index -> the caller's
    outputs: list[tuple[str, torch.Tensor]] = field(default_factory=list)  # path, CPU copy
    cotangents: dict[str, torch.Tensor] = field(default_factory=dict)  # path -> incoming grad
    grads: dict[int, torch.Tensor] = field(default_factory=dict)  # T index -> its gradient
    raised: str | None = None
    why_not: str | None = None  # why the call could not be copied
    # how the script re-checks this call (conformance/harness/recheck.py), or why it cannot
    recheck: Any = None
    why_no_recheck: str | None = None
    index: dict[int, int] = field(default_factory=dict, repr=False)  # id(input) -> T index
    hooks: list[Any] = field(default_factory=list, repr=False)  # removed when dropped

    def input_index(self, t: torch.Tensor) -> int:
        """The T index of ``t``, an argument of this call (KeyError if it is none)."""
        return self.index[id(t)]

    def release(self) -> None:
        """Drop the hooks on the caller's tensors (the call is no longer kept)."""
        for handle in self.hooks:
            handle.remove()
        self.hooks.clear()
        self.index.clear()


def _float_src(x: float) -> str:
    if x != x:
        return 'float("nan")'
    if x in (float("inf"), float("-inf")):
        return f'float("{x}")'
    return repr(x)


class _Encoder:
    """Python source for an argument tree; tensors become ``T[i]`` (one index per object)."""

    def __init__(self) -> None:
        self.tensors: list[torch.Tensor] = []
        self.generators: list[torch.Tensor] = []  # states
        self.index: dict[int, int] = {}
        self.nbytes = 0

    def src(self, obj: Any) -> str:
        if isinstance(obj, torch.Tensor):
            return self._tensor(obj)
        if obj is None or isinstance(obj, (bool, int, str)):
            return repr(obj)
        if isinstance(obj, float):
            return _float_src(obj)
        if isinstance(obj, torch.Generator):
            self.generators.append(obj.get_state())
            return f"G[{len(self.generators) - 1}]"
        if isinstance(obj, torch.dtype):
            return str(obj)
        if isinstance(obj, torch.device):
            return "DEVICE"
        if isinstance(obj, torch.Size):
            return "torch.Size(" + self.src(tuple(obj)) + ")"
        if isinstance(obj, slice):
            return f"slice({self.src(obj.start)}, {self.src(obj.stop)}, {self.src(obj.step)})"
        if isinstance(obj, tuple):
            inner = ", ".join(self.src(v) for v in obj)
            return f"({inner},)" if len(obj) == 1 else f"({inner})"
        if isinstance(obj, list):
            return "[" + ", ".join(self.src(v) for v in obj) + "]"
        if isinstance(obj, dict) and all(isinstance(k, str) for k in obj):
            return "{" + ", ".join(f"{k!r}: {self.src(v)}" for k, v in obj.items()) + "}"
        raise Unrepresentable(f"an argument of type {type(obj).__name__}")

    def _tensor(self, t: torch.Tensor) -> str:
        if id(t) in self.index:
            return f"T[{self.index[id(t)]}]"
        if t.layout != torch.strided or t.is_nested or type(t) is not torch.Tensor:
            raise Unrepresentable(f"a {type(t).__name__} with layout {t.layout}")
        if t.device.type == "meta":
            raise Unrepresentable("a meta tensor")
        self.nbytes += t.numel() * t.element_size()
        if self.nbytes > MAX_BYTES:
            raise Unrepresentable(f"inputs over {MAX_BYTES >> 20} MiB")
        self.index[id(t)] = len(self.tensors)
        self.tensors.append(t)
        return f"T[{len(self.tensors) - 1}]"


def _flatten(obj: Any, path: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, (tuple, list)):
        for i, v in enumerate(obj):
            yield from _flatten(v, f"{path}[{i}]")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _flatten(v, f"{path}[{k!r}]")


def _tracing_unsafe() -> bool:
    """True inside compilation, export tracing or graph capture (copying would break them)."""
    if torch.compiler.is_compiling():
        return True
    return bool(torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())


def _cpu_copy(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu", copy=True)


def _storage_copy(t: torch.Tensor) -> torch.Tensor:
    """The whole storage under a view, as a flat tensor of the view's dtype."""
    n = t.untyped_storage().nbytes() // t.element_size()
    if n * t.element_size() > MAX_BYTES:
        raise Unrepresentable(f"a view of a storage over {MAX_BYTES >> 20} MiB")
    flat = torch.empty(0, dtype=t.dtype, device=t.device)
    flat.set_(t.untyped_storage(), 0, (n,), (1,))
    return _cpu_copy(flat)


def _whole_storage(t: torch.Tensor) -> bool:
    """Whether a contiguous ``t`` is all of its storage (else it is copied with the storage
    around it, so that the script sees a write outside the view)."""
    return t.storage_offset() == 0 and \
        t.numel() * t.element_size() == t.untyped_storage().nbytes()


class Trace:
    """The newest calls of one test."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.pending: Any = None  # a re-check stated before the call (recheck.expect_next)

    def call(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        pending, self.pending = self.pending, None
        if _tracing_unsafe():
            return fn(*args, **kwargs)
        record = self._before(args, kwargs)
        for old in self.calls[:-(KEEP_CALLS - 1) or None]:
            old.release()
        self.calls = [*self.calls[-(KEEP_CALLS - 1):], record]
        if pending is not None and record.why_not is None:
            pending(record)
        try:
            out = fn(*args, **kwargs)
        except BaseException as exc:
            record.raised = f"{type(exc).__name__}: {exc}"
            raise
        if record.why_not is None:
            with contextlib.suppress(Exception):
                self._after(record, out)
        return out

    @staticmethod
    def _before(args: tuple, kwargs: dict) -> Call:
        enc = _Encoder()
        try:
            args_src = f"({enc.src(tuple(args))}, {enc.src(dict(kwargs))})"
            copies, layouts = [], {}
            for i, t in enumerate(enc.tensors):
                plain = t.is_contiguous() and (
                    _whole_storage(t) or t.untyped_storage().nbytes() > MAX_BYTES)
                if plain or t.requires_grad:
                    copies.append(_cpu_copy(t))
                    continue
                layouts[i] = [list(t.shape), list(t.stride()), t.storage_offset()]
                copies.append(_storage_copy(t))
        except Unrepresentable as exc:
            return Call(why_not=str(exc))
        except Exception as exc:  # a tensor subclass that refuses to be copied
            return Call(why_not=f"copying the inputs raised {type(exc).__name__}")
        grads = [i for i, t in enumerate(enc.tensors) if t.requires_grad]
        leaves = {i: enc.tensors[i] for i in grads if enc.tensors[i].is_leaf}
        record = Call(args_src, copies, enc.generators, layouts, grads, leaves,
                      index=dict(enc.index))
        for i, leaf in leaves.items():  # its gradient, also when autograd.grad takes it
            def keep(g: torch.Tensor, i: int = i) -> None:
                record.grads[i] = _cpu_copy(g)
            with contextlib.suppress(Exception):
                record.hooks.append(leaf.register_hook(keep))
        return record

    @staticmethod
    def _after(record: Call, out: Any) -> None:
        for path, t in _flatten(out):
            record.outputs.append((path, _cpu_copy(t)))
            if t.requires_grad and t.grad_fn is not None:
                def keep(g: torch.Tensor, path: str = path) -> None:
                    record.cotangents[path] = _cpu_copy(g)
                record.hooks.append(t.register_hook(keep))

    def find(self, actual: np.ndarray) -> tuple[Call, str, str] | None:
        """The newest call with an output, or an input's gradient, equal to ``actual``:
        (call, "output" | "grad", the output's path | the input's T index)."""
        actual = np.asarray(actual, dtype=np.float64)
        for record in reversed(self.calls):
            if record.why_not is not None or record.raised is not None:
                continue
            for path, t in record.outputs:
                if _same(t, actual):
                    return record, "output", path
            for i, leaf in record.leaves.items():
                grad = record.grads.get(i, leaf.grad)
                if grad is not None and _same(grad, actual):
                    return record, "grad", str(i)
        return None

    def release(self) -> None:
        for record in self.calls:
            record.release()


def _same(t: torch.Tensor, actual: np.ndarray) -> bool:
    if tuple(t.shape) != actual.shape or t.is_complex():
        return False
    return bool(np.array_equal(exact_numpy(t).astype(np.float64), actual, equal_nan=True))


_ACTIVE: Trace | None = None


def active() -> Trace | None:
    return _ACTIVE


@contextlib.contextmanager
def tracing(trace: Trace | None) -> Iterator[Trace | None]:
    """Make ``trace`` the active one for the duration (None: no tracing)."""
    global _ACTIVE
    previous, _ACTIVE = _ACTIVE, trace
    try:
        yield trace
    finally:
        _ACTIVE = previous
        if trace is not None:
            trace.release()
