"""Operands as views inside larger, guarded storages.

Every tensor of a case is a view into a buffer whose other elements (before it, after it,
and between its elements for strided layouts) hold ``GUARD``; a read outside the view
returns GUARD (so a silent out-of-bounds read cannot pass as an error-free valid result),
and a write outside it changes a guard, which ``Guarded.intact`` reports.

Guards a dead device context cannot hide (``arena``): an isolated invalid case allocates its
buffers in files of a shared-memory folder its parent owns (on CUDA / HIP those pages are
registered with the driver and handed to the kernels as mapped host memory), after writing a
manifest of where each view lies. Whatever happens to the child (a device assert that
poisons its context, an abort, a segfault, a hang), the parent reads the guards from the
files afterwards (``read_arena``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
            base.to(torch.complex128).numpy() if base.dtype.is_complex else \
            base.to(torch.int64).numpy()
        changed = (values != (1 if base.dtype == torch.bool else GUARD)) & ~self.inside
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


def guarded(name: str, values: torch.Tensor, layout: str, arena: str | None = None,
            manifest: list[dict[str, Any]] | None = None) -> Guarded:
    """A view holding ``values`` (same dtype and device) inside a guarded buffer; in
    ``arena`` (a folder) when given, its place appended to ``manifest``. Layout
    ``expanded``: every element of the view is one stored element (stride 0)."""
    shape = tuple(values.shape)
    stored = values
    if layout == "expanded":  # stride 0 along the last dim (along every dim for 1-D)
        keep = (*shape[:-1], 1) if len(shape) >= 2 else (1,) * len(shape)
        stored = values[..., :1].contiguous() if len(shape) >= 2 else values.reshape(-1)[:1]
        assert bool((stored.expand(shape) == values).all()), "expanded: equal along the last dim"
        strides = tuple(0 if k == 1 and s != 1 else st for k, s, st in
                        zip(keep, shape, _strides(keep, "contiguous"), strict=True))
    else:
        strides = _strides(shape, layout)
    span = (1 + sum((s - 1) * st for s, st in zip(shape, strides, strict=True))
            if values.numel() else 0)
    # room for a whole row (or more) read or written past either end, empty views included
    pad = max(PAD, 1 + sum(max(s, 1) * st for s, st in zip(shape, strides, strict=False)))
    size = pad + span + pad
    base = _arena_buffer(arena, name, size, values.dtype, values.device) if arena else None
    if base is None:
        base = torch.empty((size,), dtype=values.dtype, device=values.device)
    base.fill_(GUARD)
    view = base.as_strided(shape, strides, pad)
    if layout == "expanded":  # the stored elements, each seen through stride 0
        base.as_strided(stored.shape, _strides(tuple(stored.shape), "contiguous") if
                        len(shape) >= 2 else (1,) * len(shape), pad).copy_(stored)
    else:
        view.copy_(values)
    if arena is not None and manifest is not None:
        manifest.append({"name": name, "dtype": str(values.dtype).removeprefix("torch."),
                         "size": size, "shape": list(shape), "strides": list(strides),
                         "offset": pad, "file": f"{name}.bin" if base.device.type == "cpu"
                         or getattr(base, "_arena_file", False) else None})
    positions = torch.arange(size).as_strided(shape, strides, pad).reshape(-1).numpy()
    inside = np.zeros(size, dtype=bool)
    inside[positions] = True
    return Guarded(name, view, base, inside)


def _data_values(values: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """Data in the run's dtype: +-[0.5, 2) as is for floating dtypes, times 4 and rounded
    for signed integers (+-[2, 8]), its magnitude for unsigned ones, its sign for bool."""
    values = np.asarray(values, dtype=np.float64)
    if dtype.is_floating_point:
        return torch.from_numpy(values.copy()).to(dtype)
    if dtype.is_complex:  # the imaginary parts: the same values in reverse order
        flipped = values.reshape(-1)[::-1].reshape(values.shape)
        return torch.from_numpy(np.asarray(values + 1j * flipped)).to(dtype)
    if dtype == torch.bool:
        return torch.from_numpy(np.asarray(values > 0))
    scaled = np.rint(values * 4)
    if dtype == torch.uint8:
        scaled = np.abs(scaled)
    return torch.from_numpy(np.asarray(scaled, dtype=np.int64)).to(dtype)


def materialize(case: Case, dtype: torch.dtype, index_dtype: str, device: torch.device | str,
                layout: str, arena: str | None = None) -> dict[str, Guarded]:
    """Every array of the case as a guarded view on ``device``: data in ``dtype``, indices
    and offsets in ``index_dtype``, class targets in int64 (the arrays ``case.expanded``
    names as stride-0 views); in ``arena`` when given, with its manifest written before
    anything runs on them."""
    out = {}
    manifest: list[dict[str, Any]] = []
    for name, (role, values) in case.arrays.items():
        if role == "data":
            t = _data_values(values, dtype)
        elif role == "mask":
            t = torch.from_numpy(np.asarray(values, dtype=bool))
        else:
            t = torch.from_numpy(np.asarray(values, dtype=np.int64)).to(
                getattr(torch, index_dtype if role in ("index", "offsets") else "int64"))
        out[name] = guarded(name, t.to(device), "expanded" if name in case.expanded else
                            layout, arena, manifest)
    if arena is not None:
        sync = getattr(getattr(torch, torch.device(device).type, None), "synchronize", None)
        if sync is not None and torch.device(device).type != "cpu":
            sync()  # the guards are in the files before the op can kill the context
        Path(arena, "manifest.json").write_text(json.dumps(manifest))
    return out


class _HostRegistered:
    """Mapped host pages as a CUDA / HIP array (``__cuda_array_interface__``, bytes)."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 2}


def _arena_buffer(arena: str, name: str, size: int, dtype: torch.dtype,
                  device: torch.device) -> torch.Tensor | None:
    """A 1-D buffer of ``size`` elements backed by the file ``arena/name.bin``: the host
    mapping itself on the CPU, the same pages registered as mapped host memory on CUDA /
    HIP; None where the device cannot use host pages (its guards stay in device memory)."""
    host = torch.from_file(os.path.join(arena, f"{name}.bin"), shared=True, size=size,
                           dtype=dtype)
    if device.type == "cpu":
        return host
    if device.type != "cuda":
        return None
    try:
        nbytes = host.numel() * host.element_size()
        cudart = torch.cuda.cudart()
        # cudaHostRegisterPortable | cudaHostRegisterMapped
        err = cudart.cudaHostRegister(host.data_ptr(), nbytes, 0x01 | 0x02)
        if int(getattr(err, "value", err)) != 0:
            return None
        raw = torch.as_tensor(_HostRegistered(host.data_ptr(), nbytes), device=device)
        out = raw.view(dtype)
    except Exception:
        return None
    out._arena_host = host  # type: ignore[attr-defined]  # keeps the mapping alive
    out._arena_file = True  # type: ignore[attr-defined]
    return out


def read_arena(arena: str | os.PathLike[str]) -> tuple[list[str], str]:
    """The guards of an arena's views as ``Guarded.intact`` words them (one line per
    changed view), read from the files whatever became of the process that wrote them;
    the second item says why they could not be read ("" when they were)."""
    path = Path(arena, "manifest.json")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return [], "the case never wrote its manifest (it ended before its operands existed)"
    found, missing = [], []
    for entry in manifest:
        if entry["file"] is None:
            missing.append(entry["name"])
            continue
        base = torch.from_file(str(Path(arena, entry["file"])), shared=False,
                               size=entry["size"], dtype=getattr(torch, entry["dtype"]))
        view = base.as_strided(entry["shape"], entry["strides"], entry["offset"])
        positions = torch.arange(entry["size"]).as_strided(
            entry["shape"], entry["strides"], entry["offset"]).reshape(-1).numpy()
        inside = np.zeros(entry["size"], dtype=bool)
        inside[positions] = True
        count, text = Guarded(entry["name"], view, base, inside).intact()
        if count:
            found.append(text)
    why = f"in device memory (not readable from the parent): {', '.join(missing)}" \
        if missing else ""
    return found, why


def remove_arena(arena: str | os.PathLike[str], recursive: bool = False) -> None:
    """Delete an arena's files and folder (``recursive``: its case folders too)."""
    if recursive:
        shutil.rmtree(arena, ignore_errors=True)
        return
    for child in Path(arena).glob("*"):
        with contextlib.suppress(OSError):
            child.unlink()
    with contextlib.suppress(OSError):
        Path(arena).rmdir()
