"""Planted export round trips for the TF32 rule (conformance/areas/export/test_tf32.py),
emulated on the CPU: the program runs with the operands of its matrix products and
convolutions rounded first, as cuBLAS / cuDNN do with TF32 on. ``tf32_products`` rounds
to TF32 (what the TF32 rule must accept, and the strict float32 rule must not);
``bf16_products`` to bfloat16's 7 mantissa bits (what neither rule may accept)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from conformance.areas.export.baseline import tf32
from impls.export import Program, dynamic_dims, exported

_aten = torch.ops.aten
# the products and where each takes its two operands
_PRODUCTS = {_aten.mm.default: (0, 1), _aten.bmm.default: (0, 1), _aten.addmm.default: (1, 2),
             _aten.baddbmm.default: (1, 2), _aten.convolution.default: (0, 1),
             # the CPU's fused LSTM layer: its input, weight_ih, weight_hh and h0 (the
             # states it carries between steps stay float32: a partial emulation)
             _aten.mkldnn_rnn_layer.default: (0, 1, 2, 5)}


def _bf16(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.bfloat16).to(t.dtype)


class _Rounded(TorchDispatchMode):
    def __init__(self, rnd: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.rnd = rnd

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        where = _PRODUCTS.get(func)
        if where is not None:
            args = tuple(self.rnd(a) if i in where and isinstance(a, torch.Tensor)
                         and a.dtype == torch.float32 else a for i, a in enumerate(args))
        return func(*args, **(kwargs or {}))


def _rounding(rnd: Callable[[torch.Tensor], torch.Tensor], name: str) -> Any:
    def fn(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
        ep = exported(module, args, dynamic_shapes, while_loop=False)
        program = ep.module()

        def run(*xs: torch.Tensor) -> Any:
            with _Rounded(rnd):
                return program(*xs)

        return Program(run, dynamic_dims(ep))

    fn.conformance_name = name  # type: ignore[attr-defined]
    fn.conformance_dtypes = ["float32"]  # type: ignore[attr-defined]
    fn.conformance_features = ["dynamic.batch"]  # type: ignore[attr-defined]
    return fn


tf32_products = _rounding(tf32, "tf32_products")
bf16_products = _rounding(_bf16, "bf16_products")
