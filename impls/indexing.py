"""Indexing implementations: torch's own functions and methods on the run's device.

Contract (one area per op, ``indexing.<op>``, the op's torch name exactly): a callable with
the signature and semantics of that torch function or method. In-place methods take the
tensor first and return it (``fn(self, *args) -> self``); ``getitem`` is
``fn(x, key) -> x[key]`` and ``setitem`` ``fn(x, key, value) -> x`` after ``x[key] = value``.
Out-of-range indices must raise (IndexError, RuntimeError or torch.AcceleratorError), at
the call or no later than the next synchronisation.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.nn.functional as F


def index_select(x: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    return torch.index_select(x, dim, index)


def gather(x: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    return torch.gather(x, dim, index)


def scatter_(x: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    return x.scatter_(dim, index, src)


def scatter_add_(x: torch.Tensor, dim: int, index: torch.Tensor,
                 src: torch.Tensor) -> torch.Tensor:
    return x.scatter_add_(dim, index, src)


def scatter_reduce_(x: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor,
                    reduce: str, *, include_self: bool = True) -> torch.Tensor:
    return x.scatter_reduce_(dim, index, src, reduce, include_self=include_self)


def index_add_(x: torch.Tensor, dim: int, index: torch.Tensor, source: torch.Tensor, *,
               alpha: Any = 1) -> torch.Tensor:
    return x.index_add_(dim, index, source, alpha=alpha)


def index_copy_(x: torch.Tensor, dim: int, index: torch.Tensor,
                source: torch.Tensor) -> torch.Tensor:
    return x.index_copy_(dim, index, source)


def index_fill_(x: torch.Tensor, dim: int, index: torch.Tensor, value: Any) -> torch.Tensor:
    return x.index_fill_(dim, index, value)


def index_put_(x: torch.Tensor, indices: tuple[torch.Tensor, ...], values: torch.Tensor,
               accumulate: bool = False) -> torch.Tensor:
    return x.index_put_(indices, values, accumulate)


def index_reduce_(x: torch.Tensor, dim: int, index: torch.Tensor, source: torch.Tensor,
                  reduce: str, *, include_self: bool = True) -> torch.Tensor:
    with warnings.catch_warnings():  # "index_reduce() is in beta"
        warnings.simplefilter("ignore", UserWarning)
        return x.index_reduce_(dim, index, source, reduce, include_self=include_self)


def take(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return torch.take(x, index)


def put_(x: torch.Tensor, index: torch.Tensor, source: torch.Tensor,
         accumulate: bool = False) -> torch.Tensor:
    return x.put_(index, source, accumulate)


def getitem(x: torch.Tensor, key: Any) -> torch.Tensor:
    return x[key]


def setitem(x: torch.Tensor, key: Any, value: Any) -> torch.Tensor:
    x[key] = value
    return x


def embedding(input: torch.Tensor, weight: torch.Tensor, **kwargs: Any) -> torch.Tensor:
    return F.embedding(input, weight, **kwargs)


def embedding_bag(input: torch.Tensor, weight: torch.Tensor, offsets: torch.Tensor | None = None,
                  **kwargs: Any) -> torch.Tensor:
    return F.embedding_bag(input, weight, offsets, **kwargs)


def nll_loss(input: torch.Tensor, target: torch.Tensor, **kwargs: Any) -> torch.Tensor:
    return F.nll_loss(input, target, **kwargs)


def cross_entropy(input: torch.Tensor, target: torch.Tensor, **kwargs: Any) -> torch.Tensor:
    return F.cross_entropy(input, target, **kwargs)


def one_hot(tensor: torch.Tensor, num_classes: int = -1) -> torch.Tensor:
    return F.one_hot(tensor, num_classes)


def take_along_dim(input: torch.Tensor, indices: torch.Tensor,
                   dim: int | None = None) -> torch.Tensor:
    return torch.take_along_dim(input, indices, dim)


def searchsorted(sorted_sequence: torch.Tensor, values: torch.Tensor, *, right: bool = False,
                 sorter: torch.Tensor | None = None) -> torch.Tensor:
    with warnings.catch_warnings():  # "... tensor is non-contiguous, this will lower the
        # performance ..." (a copy: the suite's operands are strided views on purpose)
        warnings.filterwarnings("ignore", r"torch\.searchsorted\(\): .* is non-contiguous",
                                UserWarning)
        return torch.searchsorted(sorted_sequence, values, right=right, sorter=sorter)


def bincount(input: torch.Tensor, weights: torch.Tensor | None = None,
             minlength: int = 0) -> torch.Tensor:
    return torch.bincount(input, weights, minlength)


def masked_select(input: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.masked_select(input, mask)


def masked_scatter_(x: torch.Tensor, mask: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    return x.masked_scatter_(mask, source)


def repeat_interleave(input: torch.Tensor, repeats: torch.Tensor, dim: int | None = None, *,
                      output_size: int | None = None) -> torch.Tensor:
    return torch.repeat_interleave(input, repeats, dim, output_size=output_size)


for _name, _fn in list(globals().items()):
    if callable(_fn) and getattr(_fn, "__module__", None) == __name__:
        _fn.conformance_name = (f"torch.Tensor.{_name}" if _name.endswith("_") else
                                f"torch.Tensor.__{_name}__" if _name in ("getitem", "setitem")
                                else f"F.{_name}" if _name in (
                                    "embedding", "embedding_bag", "nll_loss", "cross_entropy",
                                    "one_hot") else f"torch.{_name}")

# torch.compile of these is tested (test_compiled): an opt-in feature, declared by name
index_select.conformance_features = ["compile"]
index_add_.conformance_features = ["compile"]
