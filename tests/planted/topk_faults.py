"""Wrong TopK implementations (each a bug seen in real selection kernels)."""

from __future__ import annotations

import torch


def nan_smallest(x, k, dim=-1, largest=True, sorted=True):
    """Orders NaN below every number (a comparator written without the NaN case)."""
    if not x.dtype.is_floating_point:
        return torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)
    key = torch.where(torch.isnan(x), torch.full_like(x, -float("inf")), x)
    _, idx = torch.topk(key, k, dim=dim, largest=largest, sorted=sorted)
    # among -inf and NaN, prefer NaN last: stable enough for the bug to show
    return x.gather(dim, idx) if x.dim() else x.clone(), idx


def duplicate_index_on_ties(x, k, dim=-1, largest=True, sorted=True):
    """Returns the first tied index twice (a race between threads writing equal keys)."""
    values, idx = torch.topk(x, k, dim=dim, largest=largest, sorted=True)
    if x.dim() == 0 or k < 2:
        return values, idx
    v, i = values.movedim(dim, -1).clone(), idx.movedim(dim, -1).clone()
    tie = v[..., 1:] == v[..., :-1]
    i[..., 1:] = torch.where(tie, i[..., :-1], i[..., 1:])
    return v.movedim(-1, dim), i.movedim(-1, dim)


def wrong_beyond_768(x, k, dim=-1, largest=True, sorted=True):
    """Correct for short slices; for slices longer than 768 (a 3 KB float32 cache), only
    the first 768 elements are searched and the tail of the result repeats them."""
    n = x.shape[dim] if x.dim() else 1
    if n <= 768 or k == 0:
        return torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)
    head = x.narrow(dim, 0, 768)
    kk = min(k, 768)
    values, idx = torch.topk(head, kk, dim=dim, largest=largest, sorted=sorted)
    reps = -(-k // kk)
    values = torch.cat([values] * reps, dim=dim).narrow(dim, 0, k)
    idx = torch.cat([idx] * reps, dim=dim).narrow(dim, 0, k)
    return values, idx


def sign_of_zero_lost(x, k, dim=-1, largest=True, sorted=True):
    """Returns +0.0 where the input held -0.0 (values rebuilt by an addition)."""
    values, idx = torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)
    if x.dtype.is_floating_point:
        values = values + 0.0
    return values, idx


def ignores_sorted(x, k, dim=-1, largest=True, sorted=True):
    """Never sorts its result (treats sorted=True like sorted=False, reversed)."""
    values, idx = torch.topk(x, k, dim=dim, largest=largest, sorted=True)
    if x.dim() == 0:
        return values, idx
    return values.flip(dim), idx.flip(dim)


def crashes_on_nan(x, k, dim=-1, largest=True, sorted=True):
    """Aborts on a NaN input (a kernel whose NaN path raises instead of ranking NaN first):
    a crash, not a wrong value."""
    if x.dtype.is_floating_point and bool(torch.isnan(x).any()):
        raise RuntimeError("planted: selection kernel aborted on a NaN input")
    return torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)


def total_order_nans(x, k, dim=-1, largest=True, sorted=True):
    """Ranks floats in IEEE 754 totalOrder (a radix sort on the raw bits): a NaN with the
    sign bit set ranks below -inf, a positive NaN above +inf."""
    if not x.dtype.is_floating_point or x.dim() == 0:
        return torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)
    ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()]
    bits = x.contiguous().view(ints).to(torch.int64)
    # totalOrder key: flip the magnitude bits of negatives (their bits grow as they shrink)
    magnitude_mask = (1 << (8 * x.element_size() - 1)) - 1
    key = torch.where(bits < 0, bits ^ magnitude_mask, bits)
    _, idx = torch.topk(key, k, dim=dim, largest=largest, sorted=sorted)
    return x.gather(dim, idx), idx


for _fn in (nan_smallest, duplicate_index_on_ties, wrong_beyond_768, sign_of_zero_lost,
            ignores_sorted, crashes_on_nan, total_order_nans):
    _fn.conformance_name = f"planted.{_fn.__name__}"

SELFTEST = [  # torch-conformance selftest (conformance/cli/selftest.py)
    {"area": "topk", "impl": name, "path": "topk", "expect": "killed",
     "select": f"planted.{name}"}
    for name in ("nan_smallest", "duplicate_index_on_ties", "wrong_beyond_768",
                 "sign_of_zero_lost", "ignores_sorted", "total_order_nans")
]
