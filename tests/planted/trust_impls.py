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


def declared_erfcx(input: torch.Tensor) -> torch.Tensor:
    """torch.special.erfcx declaring that it wraps the shipped one: the shipped one's entries
    whose ``match`` names it in the test id (``test_backward_large[torch.special.erfcx-*]``)
    apply to this one's ids too (issue 64: they did not)."""
    return torch.special.erfcx(input)


declared_erfcx.conformance_name = "user.erfcx_declared"  # type: ignore[attr-defined]
declared_erfcx.conformance_wraps = "impls.special:erfcx"  # type: ignore[attr-defined]
