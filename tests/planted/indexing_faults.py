"""Planted indexing faults (``--impl indexing.<op>=planted.indexing_faults:<attr>``), each
with a correct twin that must pass the same tests."""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.nn.functional as F


def clamping_index_select(x: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """Clamps indices into range instead of raising."""
    n = x.shape[dim] if x.dim() else 1
    return torch.index_select(x, dim, index.clamp(0, max(n - 1, 0)))


def wrapping_gather(x: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """Wraps every index modulo n."""
    n = x.shape[dim] if x.dim() else 1
    return torch.gather(x, dim, index % max(n, 1))


def embedding_reads_next_row(input: torch.Tensor, weight: torch.Tensor,
                             **kwargs: Any) -> torch.Tensor:
    """Accepts index == num_embeddings and reads the row after the table."""
    n, d = weight.shape
    if input.numel() and (int(input.min()) < 0 or int(input.max()) > n):
        raise IndexError("index out of range in self")
    grown = weight.as_strided((n + 1, d), weight.stride(), weight.storage_offset())
    return F.embedding(input, grown, **kwargs)


def scatter_one_past(x: torch.Tensor, dim: int, index: torch.Tensor,
                     src: torch.Tensor) -> torch.Tensor:
    """Scatters correctly, then also writes the storage element after the destination."""
    x.scatter_(dim, index, src)
    if x.numel() and index.numel():
        last = x.storage_offset() + sum((s - 1) * st
                                        for s, st in zip(x.shape, x.stride(), strict=True))
        x.as_strided((1,), (1,), last + 1).fill_(0)
    return x


def index_select_accepts_negative(x: torch.Tensor, dim: int,
                                  index: torch.Tensor) -> torch.Tensor:
    """Right values, but wraps the negative indices that index_select must reject."""
    n = x.shape[dim] if x.dim() else 1
    return torch.index_select(x, dim, torch.where(index < 0, index + n, index))


class _LateTake:
    """Raises an invalid index's error only on the call after the next one."""

    def __init__(self) -> None:
        self.pending: list[int] = []  # calls left before the stored error is raised

    def __call__(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        self.pending = [c - 1 for c in self.pending]
        if self.pending and self.pending[0] < 0:
            self.pending.pop(0)
            raise IndexError("out of range: an index of an earlier call")
        n = x.numel()
        if index.numel() and (int(index.min()) < -n or int(index.max()) >= n):
            self.pending.append(1)
            index = index.clamp(-n, n - 1)
        return torch.take(x, index)


late_take = _LateTake()
late_take.conformance_name = "planted.late_take"


def correct_index_select(x: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    return torch.index_select(x, dim, index)


def correct_gather(x: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    return torch.gather(x, dim, index)


def correct_embedding(input: torch.Tensor, weight: torch.Tensor, **kwargs: Any) -> torch.Tensor:
    return F.embedding(input, weight, **kwargs)


def correct_scatter(x: torch.Tensor, dim: int, index: torch.Tensor,
                    src: torch.Tensor) -> torch.Tensor:
    return x.scatter_(dim, index, src)


def correct_take(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return torch.take(x, index)


def index_select_writes_then_aborts(x: torch.Tensor, dim: int,
                                    index: torch.Tensor) -> torch.Tensor:
    """An unchecked kernel that stores past the end of ``x``'s storage range (the element
    right after the view) and then takes the process down, as a ROCm kernel assert or a
    segfault would: the guards must still be read (from the parent's arena) and the test
    must stop at that case."""
    n = x.shape[dim]
    if bool(((index < 0) | (index >= n)).any()):
        last = x.storage_offset() + sum((s - 1) * st for s, st in zip(x.shape, x.stride(),
                                                                       strict=True))
        past = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), last + 1, (1,), (1,))
        past.fill_(7)
        os.abort()
    return torch.index_select(x, dim, index)


for _name, _fn in list(globals().items()):
    if callable(_fn) and getattr(_fn, "__module__", None) == __name__ and not _name.startswith(
            "_") and not isinstance(_fn, type):
        _fn.conformance_name = f"planted.{_name}"

_INDEXING = "indexing/test_indexing.py"
# (area, fault, the tests that flag it: tests/test_indexing_faults.py)
_FAULTS = [
    ("indexing.index_select", "clamping_index_select", "test_invalid"),
    ("indexing.gather", "wrapping_gather", "test_invalid[n-"),
    ("indexing.embedding", "embedding_reads_next_row", "test_invalid[n-"),
    ("indexing.scatter_", "scatter_one_past", "test_"),
    ("indexing.index_select", "index_select_accepts_negative", "test_invalid[-1-"),
    ("indexing.take", "late_take", "test_invalid"),
]
_TWINS = [
    ("indexing.index_select", "correct_index_select"),
    ("indexing.gather", "correct_gather"),
    ("indexing.embedding", "correct_embedding"),
    ("indexing.scatter_", "correct_scatter"),
    ("indexing.take", "correct_take"),
]
SELFTEST = [  # torch-conformance selftest (conformance/cli/selftest.py)
    *({"area": area, "impl": name, "path": _INDEXING, "expect": "killed",
       "select": f"planted.{name} and {where}"} for area, name, where in _FAULTS),
    *({"area": area, "impl": name, "path": _INDEXING, "expect": "passes",
       "select": f"planted.{name}"} for area, name in _TWINS),
]
