"""The FA4 numerics model: the algorithm of spec.py on the CPU, step by step, in torch.

Rows are independent in the forward pass, so every (batch, head, query) row runs at once
and only the kv tiles are looped over, in the kernels' order (last to first). What is
modelled and how:

- MMA with fp32 accumulation: the exact dot product of the 16-bit inputs (float64, which
  holds every product exactly and sums up to 256 of them with a relative error below
  2**-45) rounded once to fp32 per tile product.
- fma(a, b, c) in fp32: float64 a*b + c rounded to fp32 (the product is exact in float64;
  the float64 sum then the fp32 rounding can differ from one fused rounding only at an exact
  tie, which this model accepts).
- Hardware ex2.approx.ftz: fp32 exp2 (its 2**-22 relative error is below what the checks
  resolve), with results below 2**-126 flushed to zero.
- Known differences from the sm90 kernels (impls/attention/fa4/sm90/README.md), each a
  knob of ``Fa4Config`` that is off by default and that tests/test_fa4_kernel_gaps.py
  turns on to show the checks' bounds hold a correct kernel with them: the kernels' row
  sum of P is kept per lane (each of the 4 lanes of a row sums its 32 of the tile's 128
  columns in order; the partials are added at the end as (l0 + l2) + (l1 + l3)), the model
  sums a tile's row at once (``row_sum="lanes"``); sm90's ``ex2.approx.f32`` keeps
  subnormal results (``exp2_ftz=False``); sm90's softcap uses ``tanh.approx.f32``,
  relative error up to about 2**-11, the model fp32 tanh (``tanh_rel_error``).
- Software exp2: exactly the spec's clamp, floor, Horner polynomial and exponent-bit add.
- Backward: the kernel's tiles and accumulation orders (spec.BWD): dK/dV over a kv tile's q
  tiles in increasing order, dQ over its kv tiles in increasing order (the dQ kernels own
  their tile: no atomics); dS from the fp32 P (sm90) or the rounded P (sm100); the softcap
  derivative as the kernels compute it, 1 - t*t with t = x / cap.

``Fa4Config`` holds the knobs a kernel could get wrong; the planted faults in
tests/planted/fa4_faults.py are configs. ``Fa4Model`` is an attention implementation under
the suite's contract (impls/attention/__init__.py), with a ``trace`` for the directed
checks in conformance/areas/attention/test_fa4_algorithm.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import torch

from impls.attention.fa4 import spec

F32, F64 = torch.float32, torch.float64


@dataclass(frozen=True)
class Fa4Config:
    """The algorithm's constants; defaults are the spec's (sm100)."""

    block_n: int = spec.BLOCK_N
    threshold: float = spec.RESCALE_THRESHOLD
    threshold_units: str = "log2"  # "ln" is a planted fault: growth measured in ln units
    emu_from: int | None = spec.EMU_FROM  # None: hardware exp2 only (sm90)
    poly: tuple[float, ...] = spec.EXP2_POLY
    round_p: bool = True
    stale_max: bool = True  # False: a skipped rescale still moves the max (a planted fault)
    # backward (spec.BWD): (q-tile rows, kv-tile columns) and the P that dS is computed from
    bwd_tile: tuple[int, int] = spec.BWD["sm100"]["tile"]
    ds_from_rounded_p: bool = spec.BWD["sm100"]["ds_from_rounded_p"]
    # the knobs below exist for planted faults; the spec's values are the defaults
    dq_scale: bool = True  # False: dQ misses the softmax scale
    gqa_reduce: str = "sum"  # "first": dK/dV of a GQA group taken from its first head only
    softcap_grad_sign: float = 1.0  # -1.0: the softcap derivative with the wrong sign
    # the sm90 kernels' known differences from the model (the module docstring)
    row_sum: str = "tile"  # "lanes": per-lane partial sums of P, added at the end
    exp2_ftz: bool = True  # False: subnormal exp2 results kept (sm90's ex2.approx.f32)
    tanh_rel_error: float = 0.0  # softcap's tanh off by this relative error (signed)
    tanh_error_signs: str = "alternating"  # by element; "constant": the same everywhere


@dataclass
class Trace:
    """What the directed checks look at, per row: the largest P fed to P V (before
    rounding) and how many times O was rescaled after the first live tile."""

    max_p: torch.Tensor | None = None
    rescales: torch.Tensor | None = None
    tile_max: list[torch.Tensor] = field(default_factory=list)  # per visited tile, fp32


def fma32(a: torch.Tensor, b: torch.Tensor | float, c: torch.Tensor | float) -> torch.Tensor:
    """fp32 fused multiply-add (see the module docstring for the tie caveat)."""
    b64 = b.to(F64) if isinstance(b, torch.Tensor) else b
    c64 = c.to(F64) if isinstance(c, torch.Tensor) else c
    return (a.to(F64) * b64 + c64).to(F32)


def hardware_exp2(y: torch.Tensor, ftz: bool = True) -> torch.Tensor:
    """ex2.approx.ftz.f32: fp32 exp2 with subnormal results flushed to zero (``ftz=False``:
    ex2.approx.f32, subnormals kept)."""
    r = torch.exp2(y.to(F32))
    return torch.where(r < 2.0**-126, torch.zeros_like(r), r) if ftz else r


LANES, LANE_COLS = 4, 2  # a row's 4 lanes; each holds pairs of adjacent columns in turn


def lane_of(cols: torch.Tensor) -> torch.Tensor:
    """Which of a row's 4 lanes holds each accumulator column (wgmma's fragment: lane t
    holds columns 8j + 2t and 8j + 2t + 1)."""
    return (cols // LANE_COLS) % LANES


def lane_sums(p: torch.Tensor, lo: int) -> torch.Tensor:
    """(..., 4) per-lane fp32 sums of a tile's P, each lane's columns added in order."""
    lanes = lane_of(torch.arange(lo, lo + p.shape[-1]) - lo)
    out = []
    for lane in range(LANES):
        acc = torch.zeros(p.shape[:-1], dtype=F32)
        for j in torch.nonzero(lanes == lane).flatten().tolist():
            acc = (acc + p[..., j]).to(F32)
        out.append(acc)
    return torch.stack(out, dim=-1)


def software_exp2(y: torch.Tensor, poly: tuple[float, ...] = spec.EXP2_POLY) -> torch.Tensor:
    """The spec's polynomial exp2: floor/fraction split, Horner with fp32 FMAs, the
    integer part added to the exponent bits."""
    y = torch.clamp_min(y.to(F32), -127.0)
    j = torch.floor(y)
    f = y - j  # exact in fp32
    c0, c1, c2, c3 = (float(torch.tensor(c, dtype=F32)) for c in poly)
    p = fma32(fma32(fma32(torch.full_like(f, c3), f, c2), f, c1), f, c0)
    bits = p.view(torch.int32) + (j.to(torch.int32) << 23)
    return bits.view(F32)


def _mma(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """One tile product with fp32 accumulation (exact, rounded once)."""
    return (a.to(F64) @ b.to(F64)).to(F32)


def _f32(x: float) -> float:
    """A host constant as the kernel receives it: rounded to fp32."""
    return float(torch.tensor(x, dtype=F32))


def _round(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return x.to(dtype).to(F32)


@dataclass
class _Mods:
    score_mod: Any
    mask_mod: Any
    scale: float

    def scores(self, s: torch.Tensor, idx: tuple[torch.Tensor, ...],
               cfg: Fa4Config | None = None) -> tuple[torch.Tensor, float]:
        """Spec forward steps 2-3 on a tile of fp32 scores: (x, c). With
        ``cfg.tanh_rel_error``, softcap's cap * tanh(z / cap) is off by that relative error,
        + and - alternating by element or the same everywhere (tanh.approx.f32 errs either
        way)."""
        err = cfg.tanh_rel_error if cfg is not None else 0.0
        if self.score_mod is None:
            x, c = s, _f32(self.scale * spec.LOG2E)  # c: fp64 product rounded once
        else:
            x = self.score_mod((s * _f32(self.scale)).to(F32), *idx).to(F32)
            if err and getattr(self.score_mod, "conformance_kind", "") == "softcap":
                b, h, qi, kv = idx
                sign = (1.0 if cfg.tanh_error_signs == "constant"  # type: ignore[union-attr]
                        else 1.0 - 2.0 * ((b * 7 + h * 5 + qi * 3 + kv) % 2).to(F32))
                x = (x * (1.0 + err * sign)).to(F32)
            c = _f32(spec.LOG2E)
        if self.mask_mod is not None:
            live = torch.broadcast_to(self.mask_mod(*idx), x.shape)
            x = torch.where(live, x, torch.full_like(x, -math.inf))
        return torch.broadcast_to(x, s.shape), c


def _tile_index(b: int, h: int, sq: int, lo: int, hi: int) -> tuple[torch.Tensor, ...]:
    return (torch.arange(b).view(-1, 1, 1, 1), torch.arange(h).view(1, -1, 1, 1),
            torch.arange(sq).view(1, 1, -1, 1), torch.arange(lo, hi).view(1, 1, 1, -1))


def _tiles(sk: int, block_n: int) -> list[tuple[int, int]]:
    starts = range(0, sk, block_n)
    return [(lo, min(lo + block_n, sk)) for lo in reversed(starts)]  # last to first


def _exp2(y: torch.Tensor, lo: int, cfg: Fa4Config) -> torch.Tensor:
    """Spec forward step 5: hardware exp2, the software one on columns j % 32 >= emu_from."""
    p = hardware_exp2(y, cfg.exp2_ftz)
    if cfg.emu_from is None:
        return p
    cols = (torch.arange(y.shape[-1]) + lo) % spec.BLOCK_N % 32 >= cfg.emu_from
    return torch.where(cols, software_exp2(y, cfg.poly), p)


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mods: _Mods, cfg: Fa4Config,
            trace: Trace | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Spec forward steps 1-7; k, v already expanded to the query heads. (out, lse)."""
    b, h, sq, _ = q.shape
    sk, dv, dtype = k.shape[2], v.shape[3], q.dtype
    m = torch.full((b, h, sq, 1), -math.inf, dtype=F32)
    l_sum = torch.zeros((b, h, sq, LANES if cfg.row_sum == "lanes" else 1), dtype=F32)
    o = torch.zeros((b, h, sq, dv), dtype=F32)
    max_p = torch.zeros_like(m)
    rescales = torch.zeros_like(m, dtype=torch.int64)
    mc = torch.zeros_like(m)
    for lo, hi in _tiles(sk, cfg.block_n):
        s = _mma(q, k[:, :, lo:hi].transpose(-1, -2))  # step 1
        x, c = mods.scores(s, _tile_index(b, h, sq, lo, hi), cfg)  # steps 2-3
        t = x.amax(dim=-1, keepdim=True)  # step 4
        if trace is not None:
            trace.tile_max.append(t)
        m_new = torch.maximum(m, t)
        growth = ((m_new - m) * c).to(F32)
        if cfg.threshold_units == "ln":
            growth = growth * spec.LN2
        first = torch.isinf(m)
        take = first | (growth > cfg.threshold)
        alpha = torch.where(first, torch.ones_like(m),
                            hardware_exp2(((m - m_new) * c).to(F32), cfg.exp2_ftz))
        alpha = torch.where(take, alpha, torch.ones_like(m))
        o, l_sum = o * alpha, l_sum * alpha
        rescales += (take & ~first & torch.isfinite(m_new)).long()
        m = torch.where(take, m_new, m if cfg.stale_max else m_new)
        mc = torch.where(torch.isinf(m), torch.zeros_like(m), (m * c).to(F32))  # step 5
        p = _exp2(fma32(x, c, -mc), lo, cfg)
        max_p = torch.maximum(max_p, p.amax(dim=-1, keepdim=True))
        if cfg.row_sum == "lanes":  # step 6, as the sm90 kernels keep it
            l_sum = (l_sum + lane_sums(p, lo)).to(F32)
        else:
            l_sum = l_sum + p.sum(dim=-1, keepdim=True, dtype=F32)  # step 6
        pr = _round(p, dtype) if cfg.round_p else p
        o = o + _mma(pr, v[:, :, lo:hi])
    if trace is not None:
        trace.max_p, trace.rescales = max_p, rescales
    if cfg.row_sum == "lanes":  # the lanes' butterfly: (l0 + l2) + (l1 + l3)
        l_sum = ((l_sum[..., 0:1] + l_sum[..., 2:3]).to(F32)
                 + (l_sum[..., 1:2] + l_sum[..., 3:4]).to(F32)).to(F32)
    dead = l_sum == 0  # step 7
    safe = torch.where(dead, torch.ones_like(l_sum), l_sum)
    out = torch.where(dead, torch.zeros_like(o), o * (1.0 / safe))
    lse = torch.where(dead, torch.full_like(mc, -math.inf),
                      ((mc + torch.log2(safe)) * spec.LN2).to(F32))
    return out.to(dtype), lse.squeeze(-1)


def backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
             lse: torch.Tensor, d_out: torch.Tensor, mods: _Mods, cfg: Fa4Config
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Spec backward steps 1-5 with k, v expanded: fp32 (dQ, dK, dV), not yet rounded.
    Tiles and orders as the kernels (spec.BWD): kv tiles ascending outside (dQ's order), a kv
    tile's q tiles ascending inside (dK/dV's order)."""
    b, h, sq, _ = q.shape
    sk, dtype = k.shape[2], q.dtype
    delta = (d_out.to(F32) * out.to(F32)).sum(-1, keepdim=True, dtype=F32)  # step 1
    l2 = (lse.to(F32) * spec.LOG2E).unsqueeze(-1)
    l2 = torch.where(torch.isneginf(l2), torch.full_like(l2, math.inf), l2)
    dq = torch.zeros(q.shape, dtype=F32)
    dk = torch.zeros(k.shape, dtype=F32)
    dvv = torch.zeros(v.shape, dtype=F32)
    block_m, block_n = cfg.bwd_tile
    for lo in range(0, sk, block_n):
        hi = min(lo + block_n, sk)
        for qlo in range(0, sq, block_m):
            qhi = min(qlo + block_m, sq)
            qt, dot = q[:, :, qlo:qhi], d_out[:, :, qlo:qhi]
            idx = _tile_index(b, h, sq, lo, hi)
            idx = (idx[0], idx[1], idx[2][:, :, qlo:qhi], idx[3])
            s = _mma(qt, k[:, :, lo:hi].transpose(-1, -2))
            x, c = mods.scores(s, idx, cfg)  # step 2
            p = hardware_exp2(fma32(x, c, -l2[:, :, qlo:qhi]), cfg.exp2_ftz)
            pr = _round(p, dtype)
            dvv[:, :, lo:hi] += _mma(pr.transpose(-1, -2), dot)  # step 3
            dp = _mma(dot, v[:, :, lo:hi].transpose(-1, -2))  # step 4
            ds = ((pr if cfg.ds_from_rounded_p else p) * (dp - delta[:, :, qlo:qhi])).to(F32)
            if mods.score_mod is not None:
                ds = (ds * _mod_grad(mods, s, x, idx, cfg)).to(F32)
            dsr = _round(ds, dtype)
            dk[:, :, lo:hi] += _mma(dsr.transpose(-1, -2), qt)  # step 5
            dq[:, :, qlo:qhi] += _mma(dsr, k[:, :, lo:hi])
    dq_factor = _f32(mods.scale) if cfg.dq_scale else 1.0
    return (dq * dq_factor).to(F32), (dk * _f32(mods.scale)).to(F32), dvv


def _mod_grad(mods: _Mods, s: torch.Tensor, x: torch.Tensor, idx: tuple[torch.Tensor, ...],
              cfg: Fa4Config) -> torch.Tensor:
    """d score_mod(z) / dz at z = fp32(S * scale), elementwise. The kernels' mods as they
    compute them (spec.BWD): softcap 1 - t*t with t = x / cap in fp32 (0 where x is masked),
    additive mods 1; any other mod by autograd on it."""
    kind = getattr(mods.score_mod, "conformance_kind", None)
    if kind == "softcap":
        t = (x / _f32(mods.score_mod.conformance_params["cap"])).to(F32)
        g = (1.0 - (t * t).to(F32)).to(F32) * cfg.softcap_grad_sign
        return torch.where(torch.isfinite(x), g, torch.zeros_like(g))
    if kind == "alibi":
        return torch.ones_like(x)
    with torch.enable_grad():
        z = (s * mods.scale).to(F32).detach().requires_grad_(True)
        y = torch.broadcast_to(mods.score_mod(z, *idx), z.shape)
        (g,) = torch.autograd.grad(y.sum(), z)
    return g.to(F32)


def _expand(x: torch.Tensor, group: int) -> torch.Tensor:
    return x.repeat_interleave(group, dim=1) if group > 1 else x


def _sum_heads(x: torch.Tensor, group: int) -> torch.Tensor:
    return x.unflatten(1, (-1, group)).sum(2)


def _first_head(x: torch.Tensor, group: int) -> torch.Tensor:  # a planted fault's reduction
    return x.unflatten(1, (-1, group))[:, :, 0]


class _Function(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mods: _Mods, cfg: Fa4Config):
        group = q.shape[1] // k.shape[1]
        ke, ve = _expand(k, group), _expand(v, group)
        with torch.no_grad():
            out, lse = forward(q, ke, ve, mods, cfg)
        ctx.save_for_backward(q, ke, ve, out, lse)
        ctx.mods, ctx.cfg, ctx.group = mods, cfg, group
        return out, lse

    @staticmethod
    def backward(ctx, d_out, d_lse):
        if d_lse is not None and bool((d_lse != 0).any()):
            raise NotImplementedError("the FA4 model has no gradient through lse")
        q, ke, ve, out, lse = ctx.saved_tensors
        dq, dk, dv = backward(q, ke, ve, out, lse, d_out.to(q.dtype), ctx.mods, ctx.cfg)
        g = ctx.group
        if g > 1:  # GQA: sum the group's heads in fp32, then round
            reduce = _first_head if ctx.cfg.gqa_reduce == "first" else _sum_heads
            dk, dv = reduce(dk, g), reduce(dv, g)
        return dq.to(q.dtype), dk.to(q.dtype), dv.to(q.dtype), None, None


class Fa4Model:
    """The FA4 algorithm (spec.py) as an attention implementation on the CPU."""

    conformance_devices: ClassVar[tuple[str, ...]] = ("cpu",)
    conformance_dtypes: ClassVar[tuple[str, ...]] = ("float16", "bfloat16")
    conformance_features: ClassVar[tuple[str, ...]] = (
        "mask", "score_mod", "gqa", "dv_ne_d", "fully_masked_rows", "scale", "lse",
        "backward", "fa4_algorithm")
    conformance_limits: ClassVar[dict[str, list[int]]] = {"head_dims": [64, 96, 128, 192]}
    # a test of our kernel's arithmetic, not of the device: opt-in (--emulated)
    conformance_emulation: ClassVar[str] = "the FA4 kernel's numerics model on the CPU"

    def __init__(self, name: str, arch: str, config: Fa4Config) -> None:
        self.conformance_name = name
        self.arch = arch  # the kernel modelled: its backward follows spec.BWD[arch]
        self.config = config

    def with_config(self, name: str, **changes: Any) -> Fa4Model:
        """The same kernel with some knobs changed (the planted faults)."""
        return Fa4Model(name, self.arch, replace(self.config, **changes))

    def __call__(self, q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                 return_lse=False):
        if q.device.type != "cpu":
            raise NotImplementedError("the FA4 model runs on the CPU")
        if q.dtype not in (torch.float16, torch.bfloat16):
            raise NotImplementedError("the FA4 algorithm takes 16-bit inputs")
        if q.shape[1] != k.shape[1] and not enable_gqa:
            raise ValueError("query and key heads differ: pass enable_gqa=True")
        scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
        mask_mod = block_mask.mask_mod if block_mask is not None else None
        out, lse = _Function.apply(q, k, v, _Mods(score_mod, mask_mod, scale), self.config)
        return (out, lse) if return_lse else out

    def trace(self, q, k, v, scale: float | None = None, score_mod=None,
              mask_mod=None) -> tuple[torch.Tensor, torch.Tensor, Trace]:
        """The forward pass with its trace (no autograd): (out, lse, trace)."""
        scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
        group = q.shape[1] // k.shape[1]
        tr = Trace()
        with torch.no_grad():
            out, lse = forward(q, _expand(k, group), _expand(v, group),
                               _Mods(score_mod, mask_mod, scale), self.config, tr)
        return out, lse, tr

    def exp2(self, y: torch.Tensor) -> torch.Tensor:
        """The software exp2 this configuration uses (the hardware one if it has none)."""
        if self.config.emu_from is None:
            return hardware_exp2(y)
        return software_exp2(y, self.config.poly)


fa4_model_sm100 = Fa4Model("fa4_model.sm100", "sm100", Fa4Config())
fa4_model_sm90 = Fa4Model("fa4_model.sm90", "sm90", Fa4Config(
    emu_from=None, bwd_tile=spec.BWD["sm90"]["tile"],
    ds_from_rounded_p=spec.BWD["sm90"]["ds_from_rounded_p"]))
