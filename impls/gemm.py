"""GEMM implementations: torch's matrix-product entry points, each under torch.matmul's
contract ``f(a, b) -> a @ b``. Those that only cover part of it declare their features:

- "2d":        both operands 2-D
- "batched":   both operands 3-D with the same batch size
- "broadcast": operands of any rank >= 1 with batch broadcasting (includes 1-D vectors)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def torch_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.matmul(a, b)


def torch_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.mm(a, b)


def torch_bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.bmm(a, b)


def torch_addmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """addmm with a zero bias: exercises the fused GEMM-with-epilogue path (beta = 1)."""
    bias = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    return torch.addmm(bias, a, b)


def torch_linear(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """F.linear(a, W) with W = b^T: the transposed-weight path nn.Linear takes."""
    return F.linear(a, b.mT)


torch_matmul.conformance_name = "torch.matmul"
torch_mm.conformance_name = "torch.mm"
torch_mm.conformance_features = ["2d"]
torch_bmm.conformance_name = "torch.bmm"
torch_bmm.conformance_features = ["batched"]
torch_addmm.conformance_name = "torch.addmm"
torch_addmm.conformance_features = ["2d"]
torch_linear.conformance_name = "F.linear"
torch_linear.conformance_features = ["2d"]
