"""Wrong attention implementations (FlexAttention signature), each one bug seen in real
kernels, plus a correct control built from the same pieces. All compute in float32 with
plain torch ops (so autograd gives their gradients) and round the output to the input dtype.

The ``dense_only_*`` twins declare no mask and no score_mod (only "gqa", "dv_ne_d",
"scale", "lse", "backward") and raise if given one: what the suite checks of an
implementation that has neither (tests/test_planted_faults.py).
"""

from __future__ import annotations

import math

import torch


def _grid(b: int, h: int, sq: int, sk: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    return (torch.arange(b, device=device).view(-1, 1, 1, 1),
            torch.arange(h, device=device).view(1, -1, 1, 1),
            torch.arange(sq, device=device).view(1, 1, -1, 1),
            torch.arange(sk, device=device).view(1, 1, 1, -1))


def _tf32(x: torch.Tensor) -> torch.Tensor:
    """float32 rounded to TF32's 10 mantissa bits (to nearest): what a tensor core's TF32
    mode does to float32 operands."""
    bits = x.float().contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def _prepare(q, k, v, score_mod, block_mask, scale, *, wrong_scale=False, head_mod=False,
             top_left_causal=False, tf32_scores=False):
    """Scores (after score_mod), keep-mask, expanded V: the shared front half."""
    b, hq, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    heads = torch.arange(hq, device=q.device)
    heads = heads % hkv if head_mod else heads // (hq // hkv)
    ke, ve = k[:, heads].float(), v[:, heads].float()
    if scale is None:
        scale = 1.0 / d if wrong_scale else 1.0 / math.sqrt(d)
    qs = _tf32(q) if tf32_scores else q.float()
    ke = _tf32(ke) if tf32_scores else ke
    s = torch.matmul(qs, ke.transpose(-1, -2)) * scale
    grid = _grid(b, hq, sq, sk, q.device)
    if score_mod is not None:
        s = score_mod(s, *grid)
    keep = None
    if block_mask is not None:
        fn = block_mask.mask_mod
        if top_left_causal and getattr(fn, "conformance_kind", None) == "causal_br":
            keep = grid[2] >= grid[3]  # a causal fast path aligned top-left
        else:
            keep = fn(*grid)
        keep = torch.broadcast_to(keep, s.shape)
    return s, keep, ve


def _softmax_out(s, keep, ve, *, mask_after=False, log2_lse=False):
    masked = s if keep is None else s.masked_fill(~keep, float("-inf"))
    empty = torch.isneginf(masked).all(dim=-1, keepdim=True)
    if mask_after:
        p = torch.softmax(s, dim=-1) * keep  # masks probabilities without renormalising
    else:
        p = torch.softmax(masked.masked_fill(empty, 0.0), dim=-1).masked_fill(empty, 0.0)
    lse = torch.logsumexp(masked, dim=-1)
    if log2_lse:
        lse = lse / math.log(2)
    return torch.matmul(p, ve), lse


def _finish(out, lse, q, return_lse):
    out = out.to(q.dtype)
    return (out, lse) if return_lse else out


def _make(**bugs):
    front = {k: bugs.pop(k) for k in ("wrong_scale", "head_mod", "top_left_causal",
                                      "tf32_scores") if k in bugs}

    def attention(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                  return_lse=False):
        s, keep, ve = _prepare(q, k, v, score_mod, block_mask, scale, **front)
        out, lse = _softmax_out(s, keep, ve, **bugs)
        return _finish(out, lse, q, return_lse)

    return attention


correct_dense = _make()
wrong_scale = _make(wrong_scale=True)
lse_in_log2 = _make(log2_lse=True)
causal_top_left = _make(top_left_causal=True)
mask_after_softmax = _make(mask_after=True)
gqa_head_modulo = _make(head_mod=True)
tf32_scores = _make(tf32_scores=True)  # float32 scores from TF32 operands (allow_tf32)


def _dense_only(fn):
    """The same attention for an implementation with no masks and no score mods: it
    declares only dense features, and refuses a mask or a mod (the suite must not pass one
    to an implementation that does not declare it)."""

    def attention(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                  return_lse=False):
        if score_mod is not None or block_mask is not None:
            raise NotImplementedError("dense only: declares no masks and no score mods")
        return fn(q, k, v, None, None, scale, enable_gqa, return_lse)

    attention.conformance_features = DENSE_ONLY_FEATURES
    return attention


DENSE_ONLY_FEATURES = ["gqa", "dv_ne_d", "scale", "lse", "backward"]
dense_only_correct = _dense_only(correct_dense)
dense_only_gqa_head_modulo = _dense_only(gqa_head_modulo)  # h % Hkv for h // (Hq / Hkv)


def upcast_output(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                  return_lse=False):
    """Returns out in float32 for 16-bit inputs (never rounded back to q's dtype): more
    accurate, so no error bound sees it; the output-structure check must."""
    s, keep, ve = _prepare(q, k, v, score_mod, block_mask, scale)
    out, lse = _softmax_out(s, keep, ve)
    out = out.to(torch.promote_types(q.dtype, torch.float32))
    return (out, lse) if return_lse else out


def _tiled(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
           return_lse=False, *, rescale=True, block=32):
    """Online softmax over key tiles (flash-attention forward)."""
    s, keep, ve = _prepare(q, k, v, score_mod, block_mask, scale)
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    shape = (*s.shape[:-1], 1)
    m = torch.full(shape, float("-inf"), device=q.device)
    l = torch.zeros(shape, device=q.device)  # noqa: E741
    acc = torch.zeros(*s.shape[:-1], ve.shape[-1], device=q.device)
    for start in range(0, s.shape[-1], block):
        blk = s[..., start:start + block]
        m_new = torch.maximum(m, blk.amax(dim=-1, keepdim=True))
        safe = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(blk - safe)
        alpha = torch.exp(torch.where(torch.isneginf(m), m, m - safe))
        l = l * alpha + p.sum(dim=-1, keepdim=True)  # noqa: E741
        if rescale:
            acc = acc * alpha
        acc = acc + torch.matmul(p, ve[..., start:start + block, :])
        m = m_new
    out = torch.where(l > 0, acc / torch.where(l > 0, l, torch.ones_like(l)),
                      torch.zeros_like(acc))
    lse = torch.where(l > 0, m + torch.log(torch.where(l > 0, l, torch.ones_like(l))),
                      torch.full_like(l, float("-inf")))[..., 0]
    return _finish(out, lse, q, return_lse)


def tiled_correct(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                  return_lse=False):
    return _tiled(q, k, v, score_mod, block_mask, scale, enable_gqa, return_lse)


def tiled_no_rescale(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                     return_lse=False):
    """Forgets to rescale the running output when the running max grows."""
    return _tiled(q, k, v, score_mod, block_mask, scale, enable_gqa, return_lse, rescale=False)


for _name, _fn in list(globals().items()):
    if callable(_fn) and _name in {"correct_dense", "wrong_scale", "lse_in_log2",
                                   "causal_top_left", "mask_after_softmax", "gqa_head_modulo",
                                   "tiled_correct", "tiled_no_rescale", "dense_only_correct",
                                   "dense_only_gqa_head_modulo", "upcast_output",
                                   "tf32_scores"}:
        _fn.conformance_name = f"planted.{_name}"
        _fn.conformance_dtypes = ["float16", "bfloat16", "float32"]
tf32_scores.conformance_dtypes = ["float32"]  # 16-bit operands are exact in TF32

# tests/test_planted_faults.py runs each fault on the whole attention folder (-x); here the
# forward + lse catalogue (within its DENSE_SCOPE, "catalogue or regressions") flags every
# one: float32 (tf32_scores is float32 only), 16-bit for upcast_output (exact in float32)
_LSE_CATALOGUE = "test_forward_lse_catalogue"
SELFTEST = [  # torch-conformance selftest (conformance/cli/selftest.py)
    *({"area": "attention", "impl": name, "path": "attention", "expect": "killed",
       "select": f"planted.{name} and {_LSE_CATALOGUE} and "
                 f"{'float16' if name == 'upcast_output' else 'float32'}"}
      for name in ("wrong_scale", "lse_in_log2", "causal_top_left", "mask_after_softmax",
                   "gqa_head_modulo", "tiled_no_rescale", "upcast_output", "tf32_scores",
                   "dense_only_gqa_head_modulo")),
    *({"area": "attention", "impl": name, "path": "attention", "expect": "passes",
       "select": f"planted.{name} and {_LSE_CATALOGUE}"}
      for name in ("correct_dense", "tiled_correct", "dense_only_correct")),
]
