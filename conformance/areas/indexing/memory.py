"""Operands as views inside larger, guarded storages.

Every tensor of a case is a view into a buffer whose other elements (before it, after it,
and between its elements for strided layouts) hold ``GUARD``; a read outside the view
returns GUARD (so a silent out-of-bounds read cannot pass as an error-free valid result),
and a write outside it changes a guard, which ``Guarded.intact`` reports.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from conformance.areas.indexing.cases import Case

GUARD = 123  # outside the data's range (+-[0.5, 2), integers +-[2, 8]) and exact in every dtype
PAD = 3  # at least this many guard elements before and after the view (and one view's span)
LAYOUTS = ("contiguous", "strided", "transposed")


@dataclass
class Guarded:
    name: str
    view: torch.Tensor
    base: torch.Tensor
    inside: np.ndarray  # bool mask over the base: elements that belong to the view

    def intact(self) -> tuple[int, str]:
        """(number of changed guard elements, where the first one is)."""
        base = self.base.detach().cpu()
        values = base.to(torch.float64).numpy() if base.dtype.is_floating_point else \
            base.to(torch.int64).numpy()
        changed = (values != GUARD) & ~self.inside
        count = int(changed.sum())
        if not count:
            return 0, ""
        first = int(np.argmax(changed))
        start = self.view.storage_offset()
        side = "before" if first < start else "after" if first > self.inside.nonzero()[0].max(
            initial=start) else "between the elements of"
        return count, (f"{self.name}: {count} element(s) outside the view were written, the "
                       f"first at storage element {first} ({side} the view, which starts at "
                       f"{start}), now {values[first]!r}")


def _strides(shape: tuple[int, ...], layout: str) -> tuple[int, ...]:
    order = list(range(len(shape)))
    if layout == "transposed" and len(shape) >= 2:
        order = order[::-1]  # column-major
    strides = [0] * len(shape)
    step = 2 if layout == "strided" else 1
    acc = step
    for d in reversed(order):
        strides[d] = acc
        acc *= max(shape[d], 1)
    return tuple(strides)


def guarded(name: str, values: torch.Tensor, layout: str) -> Guarded:
    """A view holding ``values`` (same dtype and device) inside a guarded buffer."""
    shape = tuple(values.shape)
    strides = _strides(shape, layout)
    span = (1 + sum((s - 1) * st for s, st in zip(shape, strides, strict=True))
            if values.numel() else 0)
    # room for a whole row (or more) read or written past either end, empty views included
    pad = max(PAD, 1 + sum(max(s, 1) * st for s, st in zip(shape, strides, strict=False)))
    size = pad + span + pad
    base = torch.full((size,), GUARD, dtype=values.dtype, device=values.device)
    view = base.as_strided(shape, strides, pad)
    view.copy_(values)
    positions = torch.arange(size).as_strided(shape, strides, pad).reshape(-1).numpy()
    inside = np.zeros(size, dtype=bool)
    inside[positions] = True
    return Guarded(name, view, base, inside)


def _data_values(values: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.from_numpy(np.array(values, dtype=np.float64)).to(dtype)
    return torch.from_numpy(np.asarray(np.rint(np.asarray(values) * 4), dtype=np.int64)).to(dtype)


def materialize(case: Case, dtype: torch.dtype, index_dtype: str, device: torch.device | str,
                layout: str) -> dict[str, Guarded]:
    """Every array of the case as a guarded view on ``device``: data in ``dtype``, indices
    and offsets in ``index_dtype``, class targets in int64."""
    out = {}
    for name, (role, values) in case.arrays.items():
        if role == "data":
            t = _data_values(values, dtype)
        else:
            t = torch.from_numpy(np.asarray(values, dtype=np.int64)).to(
                getattr(torch, index_dtype if role in ("index", "offsets") else "int64"))
        out[name] = guarded(name, t.to(device), layout)
    return out
