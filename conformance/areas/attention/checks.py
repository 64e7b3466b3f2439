"""The attention checks: run an implementation on a case and apply the FlashAttention rule

    max|out - ref| <= r * max|base - ref| + atol

with ref the float64 oracle, base the plain attention in the input precision, r = 2 for the
forward pass (3 with softcap, whose tanh amplifies rounding) and 3 for gradients, and atol
one rounding step (eps = 2u) of the output dtype at the magnitude of the terms the result
sums (the oracle's P|V| for the output, P(|dO||V|^T + rowsum|dO||O|)|K| for dQ, ...; as
|A||B| in a GEMM bound), times (1 + max|s'|): probabilities computed from scores of
magnitude |s'| carry a relative error of about eps |s'| (exp's condition number), in any
algorithm, and a kernel that recomputes P from a stored lse shows it where the baseline's
softmax happens not to. The magnitude of the terms, not of the result, because a result
that cancels to zero (gradients with one key) is still rounded at the terms' scale, while
the plain baseline can cancel exactly and so calibrates nothing there. lse (float32 in every
backend) uses the same rule with float32's eps at max|s'| + log(Sk); -inf entries (fully
masked rows) must match exactly.

atol also carries the rounding of the scores themselves, for out, lse and every gradient:
a D-term dot product accumulated in float32 (float64 for float64 inputs) is off by at most
gamma_D |scale| sum|q k| in any summation order, which does not shrink with |s| (scores
that cancel, a single key: the baseline can be exact by luck there). That bound, times
|f'(s)|, is carried through softmax and the gradients to first order
(oracles/attention_bounds.py); its maximum per tensor is the ``score`` term.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from conformance.areas.attention.cases import AttnCase
from conformance.areas.attention.reference import references
from conformance.harness.compare import Measurement, exact
from conformance.harness.history import fresh_compile_state
from conformance.harness.outcomes import unsupported
from conformance.harness.record import Record
from conformance.harness.registry import Impl
from conformance.harness.tensors import exact_numpy

EPS = {torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7, torch.float32: 2.0**-23,
       torch.float64: 2.0**-52}


def _max_err(got: np.ndarray, ref: np.ndarray) -> tuple[float, tuple[int, ...] | None]:
    if got.shape != ref.shape:
        return math.inf, None
    if ref.size == 0:
        return 0.0, None
    same_inf = np.isinf(ref) & (got == ref)
    with np.errstate(invalid="ignore"):
        err = np.where(same_inf, 0.0, np.abs(got - ref))
    err = np.where(np.isnan(err), np.inf, err)
    idx = np.unravel_index(int(np.argmax(err)), err.shape)
    return float(err[idx]), tuple(int(i) for i in idx)


def fa_rule(name: str, got: np.ndarray, ref: np.ndarray, base: np.ndarray, r: float,
            dtype: torch.dtype, terms: float, score: float = 0.0) -> Measurement:
    """The FlashAttention rule for one tensor; ``terms`` is the magnitude of what the
    result sums, ``score`` the scores' rounding carried to this tensor. The detail names
    both errors."""
    err, where = _max_err(got, ref)
    base_err, _ = _max_err(base, ref)
    atol = EPS[dtype] * max(terms, torch.finfo(dtype).tiny) + score
    bound = r * base_err + atol
    if where is None:
        detail = f"shape {got.shape} != {ref.shape}" if got.shape != ref.shape else "empty"
    else:
        detail = (f"worst at {where}: got {float(got[where])!r}, expected {float(ref[where])!r}; "
                  f"baseline error {base_err:.3g}, r = {r:g}, atol {atol:.3g} "
                  f"(score rounding {score:.3g})")
    # the largest error within the bound is every element's error within it: --repro-dir
    # re-checks the output elementwise (conformance/report/repro.py)
    arrays = (got, ref, np.broadcast_to(np.float64(bound), ref.shape)) \
        if got.shape == ref.shape else None
    return Measurement(name, err, bound, detail, arrays=arrays)


def call_impl(impl: Impl, case: AttnCase, q, k, v, block_mask, want_lse: bool,
              fresh: bool = True) -> Any:
    """The implementation on the case; ``fresh``: from a fresh compile state (every
    Hypothesis example alike, whatever its test drew before it: harness/history.py)."""
    if fresh:
        fresh_compile_state()
    kwargs: dict[str, Any] = {"score_mod": case.score_mod_fn(case.device),
                              "block_mask": block_mask, "scale": case.scale,
                              "enable_gqa": case.hq != case.hkv}
    if want_lse:
        kwargs["return_lse"] = True
    return impl(q, k, v, **kwargs)


def block_mask_for(case: AttnCase) -> Any:
    """The case's BlockMask. A mask that is the same for every batch and head (its dense
    form shows it) is built broadcast over them (B = H = None, as models do): on CPU,
    create_block_mask evaluates the mask_mod for every (b, h, q, kv), and that was a third
    of an eager FlexAttention test. Masks that vary by batch or head keep full (B, H)."""
    fn = case.mask_mod(case.device)
    if fn is None:
        return None
    from torch.nn.attention.flex_attention import create_block_mask

    dense = case.dense_mask
    same = dense is not None and bool((dense == dense[:1, :1]).all())
    batch, heads = (None, None) if same else (case.batch, case.hq)
    return create_block_mask(fn, batch, heads, case.sq, case.sk, device=case.device)


def require_claimed(impl: Impl, case: AttnCase, *, lse: bool = False,
                    backward: bool = False) -> None:
    """Mark the case unsupported if the implementation does not declare what it needs."""
    lacks = impl.caps.lacks(features=case.features(lse=lse, backward=backward))
    if lacks is None:
        lacks = shape_lacks(impl.caps.limits, case.d, case.dv, case.mask, case.score_mod,
                            backward=backward)
    if lacks:
        unsupported(f"implementation {impl.name} {lacks}")


def claims_backward(impl: Impl, case: AttnCase) -> bool:
    """Whether a forward case's backward is also declared (the feature and the shape)."""
    return (impl.caps.claims("backward") and shape_lacks(
        impl.caps.limits, case.d, case.dv, case.mask, case.score_mod, backward=True) is None)


def shape_lacks(limits: dict[str, Any], d: int, dv: int, mask: str | None,
                score_mod: str | None, backward: bool = False) -> str | None:
    """Why the declared limits exclude this head-dim shape (with this mask and score mod),
    or None: ``head_dims`` (D and Dv), ``backward_head_dims`` (those with a backward),
    ``dv_pairs`` (the [D, Dv] pairs with Dv != D) and ``head_dim_combos`` (per head dim,
    the [mask, score_mod] pairs it supports; "nomask" / "nomod" for none).
    docs/contracts.md."""
    allowed = limits.get("head_dims")
    if allowed is not None and (d not in allowed or dv not in allowed):
        return f"declares head dims {list(allowed)}, not D={d}, Dv={dv}"
    with_bwd = limits.get("backward_head_dims")
    if backward and with_bwd is not None and (d not in with_bwd or dv not in with_bwd):
        return f"declares a backward at head dims {list(with_bwd)}, not D={d}, Dv={dv}"
    pairs = limits.get("dv_pairs")
    if d != dv and pairs is not None and [d, dv] not in [list(p) for p in pairs]:
        return f"declares (D, Dv) pairs {[list(p) for p in pairs]}, not [{d}, {dv}]"
    combos = (limits.get("head_dim_combos") or {}).get(str(d))
    combo = [mask or "nomask", score_mod or "nomod"]
    if combos is not None and combo not in [list(c) for c in combos]:
        return f"declares at D={d} only the mask+score_mod pairs {[list(c) for c in combos]}"
    return None


STRUCTURE = ("output structure (out: q's dtype and device, (B, Hq, Sq, Dv); lse: float32, "
             "(B, Hq, Sq))")


def split_result(result: Any, lse: bool) -> tuple[Any, Any]:
    """(out, lse) from what the implementation returned; a return_lse=True call must give
    a pair (a failed structure check otherwise)."""
    if not lse:
        return result, None
    if isinstance(result, (tuple, list)) and len(result) == 2:
        return result[0], result[1]
    return result, _NOT_A_PAIR


_NOT_A_PAIR = object()


def output_structure(case: AttnCase, q: torch.Tensor, out: Any, lse: Any) -> Measurement:
    """out: a tensor of q's dtype and device, (B, Hq, Sq, Dv); lse (if asked for): float32
    (float64 accepted for float64 inputs, as FlexAttention returns), (B, Hq, Sq), q's
    device."""
    if lse is _NOT_A_PAIR:
        return exact(STRUCTURE, 1, 1, f"return_lse=True must return (out, lse), got a "
                                      f"{type(out).__name__}")
    problems = []
    want = {"out": (case.batch, case.hq, case.sq, case.dv), "lse": (case.batch, case.hq, case.sq)}
    for name, t in (("out", out), ("lse", lse)):
        if name == "lse" and lse is None:
            continue
        if not isinstance(t, torch.Tensor):
            problems.append(f"{name} is a {type(t).__name__}, not a torch.Tensor")
            continue
        dtypes = ((q.dtype,) if name == "out" else
                  (torch.float32, torch.float64) if q.dtype == torch.float64 else (torch.float32,))
        if t.dtype not in dtypes:
            problems.append(f"{name} dtype {t.dtype}, expected {' or '.join(map(str, dtypes))}")
        if t.device != q.device:
            problems.append(f"{name} on {t.device}, expected {q.device}")
        if tuple(t.shape) != want[name]:
            problems.append(f"{name} shape {tuple(t.shape)}, expected {want[name]}")
    return exact(STRUCTURE, len(problems), 8, "; ".join(problems))


def check_forward(record: Record, impl: Impl, case: AttnCase, *, lse: bool,
                  inputs: tuple[torch.Tensor, ...] | None = None, fresh: bool = True) -> None:
    """Forward output (and lse) under the FlashAttention rule; ``inputs`` (q, k, v) replace
    the case's random ones; ``fresh``: as ``call_impl``'s."""
    __tracebackhide__ = True
    record.case(**case.describe())
    q, k, v = inputs if inputs is not None else case.inputs()[:3]
    result = call_impl(impl, case, q, k, v, block_mask_for(case), lse, fresh)
    out, got_lse = split_result(result, lse)
    record.require(output_structure(case, q, out, got_lse))
    ref, base = references(case, q, k, v)
    r = 3.0 if case.score_mod == "softcap" else 2.0
    record.require(fa_rule("out within r*baseline error + atol of the float64 oracle",
                           exact_numpy(out), ref.out, base.out, r, case.dtype,
                           ref.terms["out"], ref.score_error["out"]))
    if lse:
        record.require(fa_rule("lse (natural log) within r*baseline error + atol",
                               exact_numpy(got_lse).astype(np.float64), ref.lse, base.lse, r,
                               torch.float32, ref.terms["lse"], ref.score_error["lse"]))


def check_backward(record: Record, impl: Impl, case: AttnCase) -> None:
    """dQ, dK, dV under the FlashAttention rule with r = 3."""
    __tracebackhide__ = True
    record.case(**case.describe())
    q, k, v, d_out = case.inputs()
    qg, kg, vg = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    out = call_impl(impl, case, qg, kg, vg, block_mask_for(case), False)
    dq, dk, dv = torch.autograd.grad(out, (qg, kg, vg), d_out)
    ref, base = references(case, q, k, v, d_out)
    for name, got, want, b in (("dQ", dq, ref.dq, base.dq), ("dK", dk, ref.dk, base.dk),
                               ("dV", dv, ref.dv, base.dv)):
        record.require(fa_rule(f"{name} within 3*baseline error + atol of the float64 oracle",
                               exact_numpy(got), want, b, 3.0, case.dtype,
                               ref.terms[name.lower()], ref.score_error[name.lower()]))
