"""Blind planted faults for the attention benchmark gate and the softcap score_mod: attention
implementations (FlexAttention signature) each carrying one small, realistic kernel bug,
plus correct twins written differently. Written from the SDPA / FlexAttention docs and the
FlashAttention papers only, without reading the suite's attention checks.

Everything is plain torch in float32 (autograd gives the gradients, except where a fault
lives in a hand-written backward), rounded to the input dtype at the end. Many faults only
show past one 128-wide kv tile, at S >= 2048, in some heads, or with a causal mask.
"""

from __future__ import annotations

import math

import torch

BLOCK = 128  # kv tile width of the "kernels" below
NEG_INF = float("-inf")
FEATURES = ["mask", "score_mod", "gqa", "dv_ne_d", "scale", "lse", "backward",
            "fully_masked_rows"]


# ----------------------------------------------------------------------------- shared pieces

def _grid(b, h, sq, sk, device):
    return (torch.arange(b, device=device).view(-1, 1, 1, 1),
            torch.arange(h, device=device).view(1, -1, 1, 1),
            torch.arange(sq, device=device).view(1, 1, -1, 1),
            torch.arange(sk, device=device).view(1, 1, 1, -1))


def _front(q, k, v, block_mask, scale, enable_gqa):
    """float32 q, GQA-expanded k and v, the scale, the index grid and the keep-mask."""
    b, hq, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    if hq != hkv:
        if not enable_gqa or hq % hkv:
            raise ValueError(f"{hq} query heads and {hkv} kv heads need enable_gqa")
        k = k.repeat_interleave(hq // hkv, dim=1)
        v = v.repeat_interleave(hq // hkv, dim=1)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    grid = _grid(b, hq, sq, sk, q.device)
    keep = None
    if block_mask is not None:
        keep = torch.broadcast_to(block_mask.mask_mod(*grid), (b, hq, sq, sk))
    return q.float(), k.float(), v.float(), scale, grid, keep


def _mod_and_mask(s, score_mod, grid, keep):
    if score_mod is not None:
        s = score_mod(s, *grid)
    if keep is not None:
        s = s.masked_fill(~keep, NEG_INF)
    return s


def _dense(s, v):
    """Exact softmax(s) @ v and natural-log lse; fully masked rows give 0 and -inf."""
    m = s.amax(dim=-1, keepdim=True).detach()
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(s - m)
    l_ = e.sum(dim=-1, keepdim=True)
    live = l_ > 0
    out = (e @ v) / torch.where(live, l_, torch.ones_like(l_))
    lse = torch.where(live, m + torch.log(torch.where(live, l_, torch.ones_like(l_))),
                      torch.full_like(l_, NEG_INF))
    return out, lse.squeeze(-1)


def _online(s, v, *, l_dtype=None, o_dtype=None, p_dtype=None, skip_tau=0.0,
            drop_last_tile=False):
    """FlashAttention-2 forward over kv tiles of BLOCK: running max m, sum l, output acc."""
    sk = s.shape[-1]
    shape = (*s.shape[:-1], 1)
    m = torch.full(shape, NEG_INF, device=s.device)
    l_ = torch.zeros(shape, device=s.device)
    acc = torch.zeros((*s.shape[:-1], v.shape[-1]), device=s.device)
    starts = list(range(0, sk, BLOCK))
    if drop_last_tile and len(starts) > 1:
        starts = starts[:-1]
    for j in starts:
        sj, vj = s[..., j:j + BLOCK], v[..., j:j + BLOCK, :]
        m_new = torch.maximum(m, sj.amax(dim=-1, keepdim=True).detach())
        m_run = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        alpha = torch.exp(m - m_run)
        if skip_tau:
            small = torch.isfinite(m) & ((m_new - m) * math.log2(math.e) < skip_tau)
            alpha = torch.where(small, torch.ones_like(alpha), alpha)
        p = torch.exp(sj - m_run)
        if p_dtype is not None:
            p = p.to(p_dtype).float()
        l_ = alpha * l_ + p.sum(dim=-1, keepdim=True)
        acc = alpha * acc + p @ vj
        if l_dtype is not None:
            l_ = l_.to(l_dtype).float()
        if o_dtype is not None:
            acc = acc.to(o_dtype).float()
        m = m_new
    live = l_ > 0
    safe = torch.where(live, l_, torch.ones_like(l_))
    m_fin = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    lse = torch.where(live, m_fin + torch.log(safe), torch.full_like(l_, NEG_INF))
    return acc / safe, lse.squeeze(-1)


def _finish(out, lse, q, return_lse):
    out = out.to(q.dtype)
    return (out, lse.float().contiguous()) if return_lse else out


def _is_causal(keep, sq, sk):
    if keep is None or sq != sk:
        return False
    i = torch.arange(sq, device=keep.device)
    return bool(torch.equal(keep, torch.broadcast_to(i.view(-1, 1) >= i.view(1, -1),
                                                      keep.shape)))


def _softcap_of(score_mod):
    if getattr(score_mod, "conformance_kind", None) != "softcap":
        return None
    return float(score_mod.conformance_params["cap"])


def _register(fn, name):
    fn.conformance_name = f"blind_bench.{name}"
    fn.conformance_features = list(FEATURES)
    fn.conformance_devices = ["cpu", "cuda"]
    fn.conformance_dtypes = ["float16", "bfloat16", "float32"]
    return fn


# ------------------------------------------------------------------- forward faults (dense/tiled)

def _forward_fault(tweak_scores=None, tweak_keep=None, tiled=None, lse_fix=None, mod=None):
    """Builds one attention from hooks on the shared pipeline."""

    def attention(query, key, value, score_mod=None, block_mask=None, scale=None,
                  enable_gqa=False, return_lse=False):
        q, k, v, sc, grid, keep = _front(query, key, value, block_mask, scale, enable_gqa)
        if tweak_keep is not None:
            keep = tweak_keep(keep, q.shape, k.shape[2], q.device)
        if tweak_scores is None:
            s = (q @ k.transpose(-1, -2)) * sc
        else:
            s, k, v = tweak_scores(q, k, v, sc)
        sm = mod(score_mod, sc) if mod is not None else score_mod
        s = _mod_and_mask(s, sm, grid, keep)
        if tiled is not None:
            kw = dict(tiled)
            if kw.pop("long_only", False) and s.shape[-1] < 2048:
                kw = {}
            out, lse = _online(s, v, **kw)
        else:
            out, lse = _dense(s, v)
        if lse_fix is not None:
            lse = lse_fix(s, lse)
        return _finish(out, lse, query, return_lse)

    return attention


def _upper_heads_tail_row(q, k, v, sc):
    hq = q.shape[1]
    nxt = [(h + 1) % hq for h in range(hq)]
    up = torch.arange(hq, device=q.device) >= hq // 2
    k_last = torch.where(up.view(1, -1, 1), k[:, nxt, 0], k[:, :, -1]).unsqueeze(2)
    v_last = torch.where(up.view(1, -1, 1), v[:, nxt, 0], v[:, :, -1]).unsqueeze(2)
    k = torch.cat([k[:, :, :-1], k_last], dim=2)
    v = torch.cat([v[:, :, :-1], v_last], dim=2)
    return (q @ k.transpose(-1, -2)) * sc, k, v


def _mid_heads_bf16_scores(q, k, v, sc):
    s = (q @ k.transpose(-1, -2)) * sc
    hq = q.shape[1]
    lo, hi = hq // 4, hq // 2
    if hq >= 4 and hi > lo:
        mid = s[:, lo:hi].to(torch.bfloat16).float()
        s = torch.cat([s[:, :lo], mid, s[:, hi:]], dim=1)
    return s, k, v


def _last_batch_drops_last_key(keep, qshape, sk, device):
    b, h, sq, _ = qshape
    bad = torch.zeros((b, 1, 1, sk), dtype=torch.bool, device=device)
    bad[-1, 0, 0, -1] = True
    base = torch.ones((b, h, sq, sk), dtype=torch.bool, device=device) if keep is None else keep
    return base & ~bad


def _causal_tile_leak(keep, qshape, sk, device):
    sq = qshape[2]
    if not _is_causal(keep, sq, sk):
        return keep
    i = torch.arange(sq, device=device)
    leak = (i.view(-1, 1) % BLOCK == BLOCK - 1) & (i.view(1, -1) == i.view(-1, 1) + 1)
    return keep | leak


def _lse_mixed_base(s, lse):
    m = s.amax(dim=-1).detach()
    return torch.where(torch.isfinite(lse), m + (lse - m) / math.log(2.0), lse)


upper_heads_tail_row_from_next_head = _forward_fault(tweak_scores=_upper_heads_tail_row)
upper_heads_tail_row_from_next_head.__doc__ = (
    "Head-stride bug in the tail-tile load: for heads h >= Hq//2 key/value row Sk-1 is read "
    "from head h+1's row 0 (offset computed with a head stride of Sk-1 rows).")
mid_heads_bf16_scores = _forward_fault(tweak_scores=_mid_heads_bf16_scores)
mid_heads_bf16_scores.__doc__ = (
    "Per-head dispatch bug: heads in [Hq//4, Hq//2) (Hq >= 4) keep S = QK^T in bf16 smem "
    "before the softmax (a wrong MMA/epilogue variant picked for those heads).")
last_batch_drops_last_key = _forward_fault(tweak_keep=_last_batch_drops_last_key)
last_batch_drops_last_key.__doc__ = (
    "varlen cu_seqlens off-by-one: the last batch element's sequence is one key short "
    "(key Sk-1 never attended), as in packed-sequence length bugs.")
causal_tile_boundary_leak = _forward_fault(tweak_keep=_causal_tile_leak)
causal_tile_boundary_leak.__doc__ = (
    "Causal off-by-one at the tile boundary: the last row of every 128-row q tile also sees "
    "key q+1 (first column of the next tile); only with a causal mask and S > 128.")
long_seq_bf16_rowsum = _forward_fault(tiled={"l_dtype": torch.bfloat16, "long_only": True})
long_seq_bf16_rowsum.__doc__ = (
    "Long-sequence (Sk >= 2048) kernel variant keeps the softmax denominator l in bf16 "
    "between kv tiles (fp32 within a tile); exact below 2048 keys.")
bf16_p_and_running_out = _forward_fault(
    tiled={"p_dtype": torch.bfloat16, "o_dtype": torch.bfloat16})
bf16_p_and_running_out.__doc__ = (
    "P rounded to bf16 before P@V (even for fp16/fp32 inputs) *and* the running output "
    "accumulator stored in bf16 between kv tiles (an FP8/bf16 pipeline mis-port).")
rescale_skipped_small_max_growth = _forward_fault(tiled={"skip_tau": 0.0625})
rescale_skipped_small_max_growth.__doc__ = (
    "Online softmax: when the row max grows by < 2^-4 (log2 units) the rescale of acc and l "
    "is skipped but the new max is still used, so earlier tiles are overweighted (a broken "
    "FA4-style conditional rescaling).")
lse_mixed_base = _forward_fault(lse_fix=_lse_mixed_base)
lse_mixed_base.__doc__ = (
    "lse = m + log2(l): max in natural units but the sum's log taken in base 2 (exp2 kernel "
    "returning the log-sum half converted); output is exact.")


def _long_seq_tail_drop(query, key, value, score_mod=None, block_mask=None, scale=None,
                        enable_gqa=False, return_lse=False):
    """Loop-bound bug: when Sk >= 2048 and Sk % 1024 == 0 the split-kv path runs
    range(0, Sk - BLOCK, BLOCK) and never visits the last 128-key tile."""
    q, k, v, sc, grid, keep = _front(query, key, value, block_mask, scale, enable_gqa)
    s = _mod_and_mask((q @ k.transpose(-1, -2)) * sc, score_mod, grid, keep)
    sk = s.shape[-1]
    out, lse = _online(s, v, drop_last_tile=sk >= 2048 and sk % 1024 == 0)
    return _finish(out, lse, query, return_lse)


long_seq_tail_tile_dropped = _long_seq_tail_drop


# --------------------------------------------------------------------------- softcap faults

class _SoftcapLinearisedGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s, cap):
        ctx.save_for_backward(s)
        ctx.cap = cap
        return cap * torch.tanh(s / cap)

    @staticmethod
    def backward(ctx, g):
        (s,) = ctx.saved_tensors
        return g * (1.0 - (s / ctx.cap) ** 2).clamp(min=0.0), None


def _softcap_mod(make):
    """Swaps the suite's softcap score_mod for the faulty kernel's own; others pass through."""

    def mod(score_mod, sc):
        cap = _softcap_of(score_mod)
        if cap is None:
            return score_mod
        return lambda s, b, h, qi, ki: make(s, cap, sc)

    return mod


def _pade32(s, cap, sc):
    x = s / cap
    x2 = x * x
    return cap * (x * (15.0 + x2) / (15.0 + 6.0 * x2)).clamp(-1.0, 1.0)


softcap_pade_tanh = _forward_fault(mod=_softcap_mod(_pade32))
softcap_pade_tanh.__doc__ = (
    "Softcap with tanh replaced by the Pade [3/2] x(15+x^2)/(15+6x^2) clamped to [-1, 1]: "
    "exact near 0, ~1e-3..1e-2 relative error for |score/cap| in 1.3..3.")
softcap_tanh_in_bf16 = _forward_fault(
    mod=_softcap_mod(lambda s, cap, sc: cap * torch.tanh((s / cap).to(torch.bfloat16)).float()))
softcap_tanh_in_bf16.__doc__ = (
    "Softcap's tanh evaluated in bf16 (argument and result rounded, ~2^-9 relative), as "
    "when the score tile is downcast before the epilogue.")
softcap_on_unscaled_scores = _forward_fault(
    mod=_softcap_mod(lambda s, cap, sc: sc * cap * torch.tanh((s / sc) / cap)))
softcap_on_unscaled_scores.__doc__ = (
    "Softcap applied to the raw QK^T before the softmax scale (cap*tanh(qk/cap)*scale), the "
    "scale/softcap folding confusion of flash-attn's softcap path.")
softcap_linearised_grad = _forward_fault(
    mod=_softcap_mod(lambda s, cap, sc: _SoftcapLinearisedGrad.apply(s, cap)))
softcap_linearised_grad.__doc__ = (
    "Softcap backward uses 1 - (s/cap)^2 (Taylor) instead of 1 - tanh(s/cap)^2; the "
    "forward is exact.")


# ------------------------------------------------------------ hand-written backward (FA-2 style)

class _Box:
    def __init__(self, score_mod, grid, k_scale=None, lse_dtype=None, dq_tail_stale=False):
        self.score_mod, self.grid = score_mod, grid
        self.k_scale, self.lse_dtype, self.dq_tail_stale = k_scale, lse_dtype, dq_tail_stale
        self.delta = None  # dS for dQ minus dS for dK, set by _PV.backward


class _QK(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, scale, box):
        ctx.save_for_backward(q, k)
        ctx.scale, ctx.box = scale, box
        return (q @ k.transpose(-1, -2)) * scale

    @staticmethod
    def backward(ctx, dx):
        q, k = ctx.saved_tensors
        box, scale = ctx.box, ctx.scale
        dxq = dx
        if box.delta is not None:
            extra = box.delta
            if box.score_mod is not None:
                with torch.enable_grad():
                    x = ((q @ k.transpose(-1, -2)) * scale).requires_grad_(True)
                    s = box.score_mod(x, *box.grid)
                    extra = torch.autograd.grad(s, x, box.delta)[0]
            dxq = dx + extra
            box.delta = None
        k_scale = scale if box.k_scale is None else box.k_scale
        return (dxq @ k) * scale, (dx.transpose(-1, -2) @ q) * k_scale, None, None


class _PV(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s, v, box):
        with torch.no_grad():
            out, lse = _dense(s, v)
        ctx.save_for_backward(s, v, out, lse)
        ctx.box = box
        return out, lse

    @staticmethod
    def backward(ctx, d_out, d_lse):
        s, v, out, lse = ctx.saved_tensors
        box = ctx.box
        lse_used = lse if box.lse_dtype is None else lse.to(box.lse_dtype).float()
        lse_c = lse_used.unsqueeze(-1)
        live = torch.isfinite(lse_c)
        p = torch.where(live, torch.exp(s - torch.where(live, lse_c, 0.0)), 0.0)
        if d_out is None:
            d_out = torch.zeros_like(out)
        dv = p.transpose(-1, -2) @ d_out
        dp = d_out @ v.transpose(-1, -2)
        big_d = (d_out * out).sum(dim=-1, keepdim=True)
        if d_lse is not None:
            big_d = big_d - d_lse.unsqueeze(-1)
        ds = p * (dp - big_d)
        sk = s.shape[-1]
        t0 = ((sk - 1) // BLOCK) * BLOCK
        if box.dq_tail_stale and t0 > 0:
            prev = torch.logsumexp(s[..., :t0], dim=-1, keepdim=True)
            prev = torch.where(torch.isfinite(prev), prev, lse_c)
            p_bad = torch.where(live, torch.exp(s[..., t0:] - prev), 0.0)
            delta = torch.zeros_like(ds)
            delta[..., t0:] = p_bad * (dp[..., t0:] - big_d) - ds[..., t0:]
            box.delta = delta
        return ds, dv, None


def _explicit_bwd(**fault):
    def attention(query, key, value, score_mod=None, block_mask=None, scale=None,
                  enable_gqa=False, return_lse=False):
        q, k, v, sc, grid, keep = _front(query, key, value, block_mask, scale, enable_gqa)
        kw = dict(fault)
        if kw.pop("k_default_scale", False):
            kw["k_scale"] = 1.0 / math.sqrt(query.shape[-1])
        box = _Box(score_mod, grid, **kw)
        s = _mod_and_mask(_QK.apply(q, k, sc, box), score_mod, grid, keep)
        out, lse = _PV.apply(s, v, box)
        return _finish(out, lse, query, return_lse)

    return attention


bwd_lse_saved_bf16 = _explicit_bwd(lse_dtype=torch.bfloat16)
bwd_lse_saved_bf16.__doc__ = (
    "Backward recomputes P = exp(S - lse) from an lse stored in bf16 (ulp 2^-5 at lse ~ 5), "
    "so P, dV and dS are off by up to ~1.5% per row; the forward is exact.")
bwd_dk_ignores_custom_scale = _explicit_bwd(k_default_scale=True)
bwd_dk_ignores_custom_scale.__doc__ = (
    "dK uses the default 1/sqrt(D) instead of the caller's scale (scale not plumbed into "
    "the dK epilogue, cf. SDPA kernels that dropped a custom scale in backward).")
bwd_dq_tail_tile_stale_lse = _explicit_bwd(dq_tail_stale=True)
bwd_dq_tail_tile_stale_lse.__doc__ = (
    "dQ's last kv tile recomputes P with the running lse from before that tile (stale "
    "state), overweighting it by 1/(1 - tail mass); dK and dV exact; needs Sk > 128.")


# ---------------------------------------------------------------------------- correct twins

def twin_online_fp32(query, key, value, score_mod=None, block_mask=None, scale=None,
                     enable_gqa=False, return_lse=False):
    """Correct: FA-2 online softmax over 128-key tiles, float32 m, l and accumulator."""
    q, k, v, sc, grid, keep = _front(query, key, value, block_mask, scale, enable_gqa)
    s = _mod_and_mask((q @ k.transpose(-1, -2)) * sc, score_mod, grid, keep)
    out, lse = _online(s, v)
    return _finish(out, lse, query, return_lse)


def twin_log_softmax_sigmoid_cap(query, key, value, score_mod=None, block_mask=None, scale=None,
                                 enable_gqa=False, return_lse=False):
    """Correct: grouped GQA via views, log_softmax, softcap as cap*(2*sigmoid(2x/cap) - 1)."""
    b, hq, sq, d = query.shape
    hkv, sk = key.shape[1], key.shape[2]
    if hq != hkv and (not enable_gqa or hq % hkv):
        raise ValueError(f"{hq} query heads and {hkv} kv heads need enable_gqa")
    g = hq // hkv
    sc = 1.0 / math.sqrt(d) if scale is None else float(scale)
    qg = query.float().reshape(b, hkv, g, sq, d)
    s = torch.einsum("bkgqd,bksd->bkgqs", qg, key.float()).reshape(b, hq, sq, sk) * sc
    grid = _grid(b, hq, sq, sk, query.device)
    cap = _softcap_of(score_mod)
    if cap is not None:
        s = cap * (2.0 * torch.sigmoid(2.0 * s / cap) - 1.0)
    elif score_mod is not None:
        s = score_mod(s, *grid)
    if block_mask is not None:
        keep = torch.broadcast_to(block_mask.mask_mod(*grid), s.shape)
        s = s.masked_fill(~keep, NEG_INF)
    any_live = torch.isfinite(s).any(dim=-1, keepdim=True)
    s_safe = torch.where(any_live, s, torch.zeros_like(s))
    p = torch.exp(torch.log_softmax(s_safe, dim=-1)) * any_live
    out = torch.einsum("bkgqs,bksv->bkgqv", p.reshape(b, hkv, g, sq, sk), value.float())
    lse = torch.where(any_live.squeeze(-1), torch.logsumexp(s_safe, dim=-1),
                      torch.full_like(s[..., 0], NEG_INF))
    return _finish(out.reshape(b, hq, sq, -1), lse, query, return_lse)


twin_explicit_backward = _explicit_bwd()
twin_explicit_backward.__doc__ = (
    "Correct: FA-2 style hand-written backward (P from saved lse, D = rowsum(dO*O)), "
    "score_mod differentiated through autograd.")


_FAULT_FNS = {
    "upper_heads_tail_row_from_next_head": upper_heads_tail_row_from_next_head,
    "mid_heads_bf16_scores": mid_heads_bf16_scores,
    "last_batch_drops_last_key": last_batch_drops_last_key,
    "causal_tile_boundary_leak": causal_tile_boundary_leak,
    "long_seq_bf16_rowsum": long_seq_bf16_rowsum,
    "long_seq_tail_tile_dropped": long_seq_tail_tile_dropped,
    "bf16_p_and_running_out": bf16_p_and_running_out,
    "rescale_skipped_small_max_growth": rescale_skipped_small_max_growth,
    "lse_mixed_base": lse_mixed_base,
    "bwd_lse_saved_bf16": bwd_lse_saved_bf16,
    "bwd_dk_ignores_custom_scale": bwd_dk_ignores_custom_scale,
    "bwd_dq_tail_tile_stale_lse": bwd_dq_tail_tile_stale_lse,
    "softcap_pade_tanh": softcap_pade_tanh,
    "softcap_tanh_in_bf16": softcap_tanh_in_bf16,
    "softcap_on_unscaled_scores": softcap_on_unscaled_scores,
    "softcap_linearised_grad": softcap_linearised_grad,
}
_CORRECT_FNS = {
    "twin_online_fp32": twin_online_fp32,
    "twin_log_softmax_sigmoid_cap": twin_log_softmax_sigmoid_cap,
    "twin_explicit_backward": twin_explicit_backward,
}
for _name, _fn in {**_FAULT_FNS, **_CORRECT_FNS}.items():
    _register(_fn, _name)

FAULTS = {name: " ".join((fn.__doc__ or "").split()) for name, fn in _FAULT_FNS.items()}
CORRECT = list(_CORRECT_FNS)
