"""The blind graph runtimes' lifetime, cache and memory faults and the graphed-callable
faults (the catalogue: ``blind_graph_runtimes.py``)."""

from __future__ import annotations

import os
import sys
from typing import Any
from unittest import mock

import torch

from .blind_graph_base import BGraph, Runtime, _tuple
from .graph_runtime_base import _Graphed

# --------------------------------------------------------------------------------------------
# lifetime, cache and memory faults


class _CacheByCode(Runtime):
    """A capture cache keyed by the function's code object (``type(fn)`` for a module) and
    the static inputs' identities, like a compiled-graph cache with too few guards: the
    closure, the module instance and its parameters are not part of the key (cf.
    pytorch/pytorch#129349: parameters whose data pointers change must re-record).
    ``reset()`` releases the graph but not the cached executable, so a new capture from the
    same code on the same inputs replays the first function."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cache: dict[Any, Any] = {}

    def capture(self, fn: Any, *inputs: torch.Tensor, **options: Any) -> Any:
        code = getattr(fn, "__code__", None) or type(fn)
        key = (code, tuple(id(t) for t in inputs))
        if key in self.cache:
            fn = self.cache[key]
        else:
            self.cache[key] = fn
        return super().capture(fn, *inputs, **options)


class _ResetKeepsMemory(BGraph):
    """``reset()`` drops the graph but not its private pool: the memory stays allocated
    until the process exits (pytorch/pytorch#190348, #190308: the pool was released only on
    some paths of ``CUDAGraph::reset``)."""

    def reset(self) -> None:
        kept = [*self.tape.made, *self.outputs, *self.held]  # the graph's pool
        super().reset()
        self.runtime.graphs.append(self)  # the pool still counts
        self.held = kept


class _ItemOnlyCheck(BGraph):
    """Host syncs inside capture are detected by patching ``torch.Tensor.item`` only;
    ``float(t)``, ``int(t)``, ``bool(t)`` (an ``if`` on a tensor) and ``tolist()`` go through
    other paths (``_local_scalar_dense`` or none at all), are allowed, and the scalars the
    capture read are baked into the graph (pytorch/pytorch#78549: sync batch norm's
    nonzero/masking under capture). On the tape a scalar read at capture is a constant of
    the later calls: baked as the fault says; the reference's own checks are off
    (``_ItemOnlyRuntime``)."""


def _from_optimizer() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        if f"torch{os.sep}optim{os.sep}" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


_ITEM = torch.Tensor.item


def _item_forbidden(self: torch.Tensor) -> Any:
    if _from_optimizer():
        return _ITEM(self)
    raise RuntimeError("host synchronisation (.item()) is not allowed inside a graph capture")


class _ItemOnlyRuntime(Runtime):
    host_sync_check = False  # the tape's _local_scalar_dense / data-dependent shape check
    value_reads_check = False  # tolist(), numpy()
    dynamic_shape_check = False

    def _sync_guard(self) -> Any:
        return mock.patch.object(torch.Tensor, "item", _item_forbidden)


class _ScratchInLiveOutputs(BGraph):
    """A graph captured into another graph's pool treats the earlier graph's outputs as
    free blocks of the pool and uses them for its scratch (any same-dtype output with enough
    elements, whatever its shape): after this graph's replay the earlier graph's outputs
    hold this graph's intermediate values (torch's docs: sharing a pool is safe only if the
    first graph's outputs are not needed after the second replays; the allocator must keep
    live outputs out of the shared pool)."""

    def replay(self) -> None:
        super().replay()
        mine = list(self.outputs)
        earlier = [g for g in self._pool if g is not self][:1]
        for g in earlier:
            for dst in g.outputs:
                for src in mine:
                    if (dst.dtype == src.dtype and dst.numel() >= src.numel() > 0
                            and dst.is_contiguous() and dst.data_ptr() != src.data_ptr()):
                        with torch.no_grad():
                            scratch = (src.detach().reshape(-1) * 2).to(dst.dtype)
                            dst.view(-1)[: scratch.numel()].copy_(scratch)
                        break


# --------------------------------------------------------------------------------------------
# graphed-callable faults


class _StaleActivations(_Graphed):
    """A graphed module whose forward is right but whose backward graph reads the
    activations saved by the capture's forward (on ``sample_args``), not those of the latest
    forward: parameter and input gradients are the capture's (cf. pytorch/pytorch#181723,
    make_graphed_callables' static gradient buffers)."""

    def __init__(self, module: torch.nn.Module, sample: tuple[torch.Tensor, ...]) -> None:
        super().__init__(module, sample)
        self.saved = [s.detach().clone() for s in sample]

    def forward(self, *args: torch.Tensor) -> Any:
        with torch.no_grad():
            for s, a in zip(self.static, args, strict=True):
                s.copy_(a)
        params = [p for p in self.module.parameters() if p.requires_grad]
        outs = _BackwardFromCapture.apply(self, len(args), *args, *params)
        return outs[0] if len(outs) == 1 else outs


class _BackwardFromCapture(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, owner: _StaleActivations, n_in: int, *tensors: torch.Tensor) -> Any:
        ctx.owner, ctx.n_in = owner, n_in
        ctx.in_grad = [t.requires_grad for t in tensors[:n_in]]
        with torch.no_grad():
            outs = _tuple(owner.module(*owner.static))
        return tuple(o.detach().clone() for o in outs)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> Any:
        owner = ctx.owner
        params = [p for p in owner.module.parameters() if p.requires_grad]
        with torch.enable_grad():
            xs = [s.detach().clone().requires_grad_(r)
                  for s, r in zip(owner.saved, ctx.in_grad, strict=True)]
            outs = _tuple(owner.module(*xs))
            wrt = [x for x in xs if x.requires_grad] + params
            pairs = [(o, g) for o, g in zip(outs, grads, strict=True)
                     if o.requires_grad and g is not None]
            got = torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs],
                                      allow_unused=True) if pairs and wrt else ()
        got = list(got)
        in_grads = [got.pop(0) if x.requires_grad else None for x in xs]
        return (None, None, *in_grads, *got)


class _NoInputGrad(_Graphed):
    """A graphed module whose static input buffers are filled without autograd: parameter
    gradients are right, but none reaches the inputs, so a graphed module after another
    (or after an embedding) cuts the gradient of everything before it
    (make_graphed_callables requires the inputs' ``requires_grad`` to match
    ``sample_args``'; cf. pytorch/pytorch#124582)."""

    def forward(self, *args: torch.Tensor) -> Any:
        with torch.no_grad():
            for s, a in zip(self.static, args, strict=True):
                s.copy_(a)
        return self.module(*self.static)
