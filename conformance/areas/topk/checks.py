"""The TopK conformance check: structure, index validity, gather identity, oracle values."""

from __future__ import annotations

import numpy as np
import torch

from conformance.harness import recheck
from conformance.harness.compare import exact
from conformance.harness.record import Record
from conformance.harness.registry import Impl
from conformance.harness.tensors import describe, dtype_name, exact_numpy
from oracles import topk as oracle


def _first_mismatch(ok: np.ndarray, got: np.ndarray, want: np.ndarray | None) -> str:
    bad = np.argwhere(~ok)
    if bad.size == 0:
        return ""
    where = tuple(int(i) for i in bad[0])
    text = f"first at {where}: got {got[where].item()!r}"
    if want is not None:
        text += f", expected {want[where].item()!r}"
    return text


def _structure(x: torch.Tensor, k: int, dim: int, result: object) -> list[str]:
    if not isinstance(result, tuple) or len(result) != 2:
        return [f"expected a (values, indices) pair, got {type(result).__name__}"]
    values, indices = result
    if not isinstance(values, torch.Tensor) or not isinstance(indices, torch.Tensor):
        return ["values and indices must be tensors"]
    shape = list(x.shape)
    if shape:
        shape[dim] = k
    problems = []
    if values.dtype != x.dtype:
        problems.append(f"values dtype {dtype_name(values.dtype)} != {dtype_name(x.dtype)}")
    if indices.dtype != torch.int64:
        problems.append(f"indices dtype {dtype_name(indices.dtype)} != int64")
    for name, t in (("values", values), ("indices", indices)):
        if list(t.shape) != shape:
            problems.append(f"{name} shape {tuple(t.shape)} != {tuple(shape)}")
        if t.device != x.device:
            problems.append(f"{name} on {t.device}, input on {x.device}")
    return problems


def check_topk(
    record: Record, impl: Impl, x: torch.Tensor, k: int, dim: int, largest: bool, sorted: bool
) -> None:
    """Run ``impl`` on one case and require every TopK property exactly."""
    __tracebackhide__ = True
    record.case(input=describe(x), dim=dim, k=k, largest=largest, sorted=sorted)
    if recheck.tracing():  # --repro-dir: the oracle's values for a standalone re-check
        want = oracle.topk(exact_numpy(x).reshape(x.shape or (1,)), k,
                           axis=dim % x.dim() if x.dim() else 0, largest=largest)
        recheck.expect_next(recheck.topk("TopK properties and the oracle's values",
                                         recheck.output(), x, want, k=k, dim=dim,
                                         largest=largest, sorted=sorted))
    result = impl(x, k, dim=dim, largest=largest, sorted=sorted)
    if isinstance(result, tuple) and type(result) is not tuple:
        result = tuple(result)  # torch.return_types.topk is a structseq
    problems = _structure(x, k, dim, result)
    record.require(exact("output structure", len(problems), 6, "; ".join(problems)))
    values, indices = result

    axis = dim % x.dim() if x.dim() else 0
    xs = exact_numpy(x).reshape(x.shape or (1,))
    vs = exact_numpy(values).reshape(values.shape or (1,))
    ix = indices.detach().cpu().numpy().reshape(indices.shape or (1,))
    n = xs.shape[axis]

    in_range = (ix >= 0) & (ix < n)
    ordered = np.sort(np.where(in_range, ix, -1), axis=axis)
    repeated = np.diff(ordered, axis=axis) == 0
    detail = _first_mismatch(in_range, ix, None)
    if repeated.any():
        at = tuple(int(i) for i in np.argwhere(repeated)[0])
        detail += f" repeated index in the slice at {at}"
    record.require(exact("indices in range and distinct per slice",
                         int((~in_range).sum() + repeated.sum()), ix.size, detail))

    gathered = np.take_along_axis(xs, ix, axis=axis)
    same = oracle.identical_values(vs, gathered)
    record.require(exact("values == x.gather(dim, indices) (bitwise, sign of zero included)",
                         int((~same).sum()), vs.size, _first_mismatch(same, vs, gathered)))

    ref = oracle.topk(xs, k, axis=axis, largest=largest)
    if sorted:
        got, want, name = vs, ref, "values equal the oracle's, in order"
    else:
        got = oracle.sort_for_multiset(vs, axis)
        want = oracle.sort_for_multiset(ref, axis)
        name = "values equal the oracle's as a multiset (sorted=False)"
    same = oracle.same_values(got, want)
    record.require(exact(name, int((~same).sum()), want.size, _first_mismatch(same, got, want)))
