"""Implementations whose declarations hold a typo (an outside author's first try): each
must be a usage error naming the attribute, the bad name and the closest valid one."""

import torch


def _attention(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
               return_lse=False):
    raise AssertionError("never called: the declaration is rejected at start-up")


def backwards_typo(*args, **kwargs):
    return _attention(*args, **kwargs)


backwards_typo.conformance_features = ["scale", "gqa", "backwards"]


def fp32_dtype(*args, **kwargs):
    return _attention(*args, **kwargs)


fp32_dtype.conformance_dtypes = ["fp32"]


def head_dim_limit(*args, **kwargs):
    return _attention(*args, **kwargs)


head_dim_limit.conformance_limits = {"head_dim": [64, 128]}


def gpu_device(x, k, dim=-1, largest=True, sorted=True):
    return torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)


gpu_device.conformance_devices = ["gpu"]


def topk_feature(x, k, dim=-1, largest=True, sorted=True):
    return torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)


topk_feature.conformance_features = ["2d"]


def cuda_only(x, k, dim=-1, largest=True, sorted=True):
    """A correct TopK that declares only CUDA: on a CPU run it tests nothing."""
    return torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)


cuda_only.conformance_name = "planted.cuda_only"
cuda_only.conformance_devices = ["cuda"]
