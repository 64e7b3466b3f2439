"""Thin wrappers of torch's ``embedding_bag`` for ``tests/test_trust.py``: matrix entries
name whose bug they are. CPU ``embedding_bag`` does not reject decreasing offsets (a strict
expected failure of the shipped implementation); a user's implementation that calls it has
the bug too, and is failed for it unless it declares that it wraps the shipped one."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


def plain_wrapper(input: torch.Tensor, weight: torch.Tensor,
                  offsets: torch.Tensor | None = None, **kwargs: Any) -> torch.Tensor:
    """torch's embedding_bag, plugged in as a user's: the shipped entries do not apply."""
    return F.embedding_bag(input, weight, offsets, **kwargs)


def declared_wrapper(input: torch.Tensor, weight: torch.Tensor,
                     offsets: torch.Tensor | None = None, **kwargs: Any) -> torch.Tensor:
    """The same, declaring what it calls: the shipped implementation's entries apply."""
    return F.embedding_bag(input, weight, offsets, **kwargs)


plain_wrapper.conformance_name = "user.embedding_bag"  # type: ignore[attr-defined]
declared_wrapper.conformance_name = "user.embedding_bag_declared"  # type: ignore[attr-defined]
declared_wrapper.conformance_wraps = "impls.indexing:embedding_bag"  # type: ignore[attr-defined]
