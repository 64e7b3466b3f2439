"""Same-precision baselines for the error-ratio rule: each catalogue model computed with
plain torch operations (matmul, sigmoid, tanh, softmax, unfold) in the case's dtype, every
intermediate rounded to it, on the CPU. They calibrate how much rounding the dtype itself
costs on each model; they never stand in for the float64 oracle.

The recurrences follow the equations of oracles/recurrent.py (torch's documented gate
order: LSTM i, f, g, o; GRU r, z, n).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import torch
from torch import Tensor, nn

# what every matrix product's operands go through first: nothing (float32 arithmetic), or
# rounding to TF32 (``tf32``: cuBLAS / cuDNN with allow_tf32 on Ampere and later)
_OPERAND: ContextVar[Callable[[Tensor], Tensor] | None] = ContextVar("operand", default=None)


def tf32(t: Tensor) -> Tensor:
    """``t`` (float32) rounded to TF32: 10 explicit mantissa bits, round to nearest with
    ties away from zero (PTX ``cvt.rna.tf32.f32``, what CUTLASS's TF32 path uses); the
    exponent range is float32's."""
    assert t.dtype == torch.float32
    bits = t.contiguous().view(torch.int32)
    rounded = (bits + 0x1000) & ~0x1FFF  # add half of the 13 dropped bits' unit, truncate
    finite = torch.isfinite(t)
    return torch.where(finite, rounded.view(torch.float32), t)


@contextlib.contextmanager
def operands(fn: Callable[[Tensor], Tensor] | None) -> Iterator[None]:
    """Round every matrix product's operands with ``fn`` inside the block."""
    token = _OPERAND.set(fn)
    try:
        yield
    finally:
        _OPERAND.reset(token)


def _mm(a: Tensor, b: Tensor) -> Tensor:
    fn = _OPERAND.get()
    return a @ b if fn is None else fn(a) @ fn(b)


def _cell(kind: str, x: Tensor, h: Tensor, c: Tensor | None, p: dict[str, Tensor], sfx: str,
          nonlinearity: str, gru_form: str) -> tuple[Tensor, Tensor | None]:
    gi = _mm(x, p[f"weight_ih_{sfx}"].T) + p.get(f"bias_ih_{sfx}", 0)
    gh = _mm(h, p[f"weight_hh_{sfx}"].T) + p.get(f"bias_hh_{sfx}", 0)
    if kind == "RNN":
        pre = gi + gh
        return (torch.tanh(pre) if nonlinearity == "tanh" else torch.relu(pre)), None
    if kind == "GRU":
        ir, iz, in_ = gi.chunk(3, -1)
        hr, hz, hn = gh.chunk(3, -1)
        r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
        n = torch.tanh(in_ + r * hn)
        if gru_form == "aten":
            return (h - n) * z + n, None
        return (1 - z) * n + z * h, None
    i, f, g, o = (gi + gh).chunk(4, -1)
    assert c is not None
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h = torch.sigmoid(o) * torch.tanh(c)
    if f"weight_hr_{sfx}" in p:
        h = _mm(h, p[f"weight_hr_{sfx}"].T)
    return h, c


def recurrent(kind: str, x: Tensor, p: dict[str, Tensor], *, num_layers: int = 1,
              bidirectional: bool = False, batch_first: bool = False,
              nonlinearity: str = "tanh", h0: Tensor | None = None, c0: Tensor | None = None,
              proj_size: int = 0, hidden_size: int = 0, gru_form: str = "doc",
              **_: Any) -> tuple[Tensor, ...]:
    """nn.RNN / LSTM / GRU in the dtype of ``x``: (output, h_n[, c_n]). ``gru_form``: the
    GRU's last step as documented, (1 - z) n + z h ("doc"), or as ATen evaluates it,
    (h - n) z + n ("aten"); they round differently (see ``run``)."""
    seq = x.transpose(0, 1) if batch_first else x
    dirs = 2 if bidirectional else 1
    batch = seq.shape[1]
    h_size = proj_size or hidden_size
    if h0 is None:
        h0 = seq.new_zeros(num_layers * dirs, batch, h_size)
    if c0 is None:
        c0 = seq.new_zeros(num_layers * dirs, batch, hidden_size)
    hs, cs = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            sfx = f"l{layer}" + ("_reverse" if d else "")
            h, c = h0[layer * dirs + d], c0[layer * dirs + d]
            steps = range(seq.shape[0] - 1, -1, -1) if d else range(seq.shape[0])
            out: list[Tensor] = [seq.new_empty(0)] * seq.shape[0]
            for t in steps:
                h, c_new = _cell(kind, seq[t], h, c, p, sfx, nonlinearity, gru_form)
                c = c_new if c_new is not None else c
                out[t] = h
            outs.append(torch.stack(out))
            hs.append(h)
            cs.append(c)
        seq = torch.cat(outs, dim=-1)
    output = seq.transpose(0, 1) if batch_first else seq
    if kind == "LSTM":
        return output, torch.stack(hs), torch.stack(cs)
    return output, torch.stack(hs)


def _layer_norm(x: Tensor, w: Tensor, b: Tensor, eps: float) -> Tensor:
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * w + b


def encoder_layer(x: Tensor, p: dict[str, Tensor], nhead: int, eps: float = 1e-5) -> Tensor:
    n, s, e = x.shape
    q, k, v = (_mm(x, p["self_attn.in_proj_weight"].T) + p["self_attn.in_proj_bias"]).chunk(3, -1)
    heads = [t.reshape(n, s, nhead, e // nhead).transpose(1, 2) for t in (q, k, v)]
    scores = _mm(heads[0], heads[1].transpose(-1, -2)) / (e // nhead) ** 0.5
    att = _mm(torch.softmax(scores, -1), heads[2]).transpose(1, 2).reshape(n, s, e)
    sa = _mm(att, p["self_attn.out_proj.weight"].T) + p["self_attn.out_proj.bias"]
    x = _layer_norm(x + sa, p["norm1.weight"], p["norm1.bias"], eps)
    ff = torch.relu(_mm(x, p["linear1.weight"].T) + p["linear1.bias"])
    ff = _mm(ff, p["linear2.weight"].T) + p["linear2.bias"]
    return _layer_norm(x + ff, p["norm2.weight"], p["norm2.bias"], eps)


def _conv(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    n, _, h, wd = x.shape
    cols = nn.functional.unfold(x, w.shape[-1], padding=w.shape[-1] // 2)
    return (_mm(w.reshape(w.shape[0], -1), cols) + b[:, None]).reshape(n, w.shape[0], h, wd)


def convnet(x: Tensor, p: dict[str, Tensor]) -> Tensor:
    y = torch.relu(_conv(x, p["conv1.weight"], p["conv1.bias"]))
    n, c, h, w = y.shape
    y = y[:, :, :h // 2 * 2, :w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2).amax((3, 5))
    y = torch.relu(_conv(y, p["conv2.weight"], p["conv2.bias"])).mean((2, 3))
    return _mm(y, p["head.weight"].T) + p["head.bias"]


FORMS = ("doc", "aten")


def run(model: Any, module: nn.Module, args: list[Tensor], gru_form: str = "doc"
        ) -> tuple[Tensor, ...]:
    """The baseline of a catalogue model (``catalogue.Model``) with ``module``'s weights.

    A GRU has two baselines (``FORMS``): torch documents h' = (1 - z) n + z h and ATen
    computes (h - n) z + n; both are legitimate, and the second rounds worse where h and n
    have opposite signs (the subtraction), so eager's GRU reached twice the first form's
    error on some weights. The error-ratio rule takes the larger of the two."""
    p = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    if model.recurrent:
        sub = {k.removeprefix("rnn."): v for k, v in p.items()}
        states = dict(zip(("h0", "c0"), args[1:], strict=False))
        return recurrent(model.kind, args[0], sub, **model.options, **states, gru_form=gru_form)
    if model.kind == "seq_model":
        emb = p["embedding.weight"][args[0]]
        sub = {k.removeprefix("lstm."): v for k, v in p.items() if k.startswith("lstm.")}
        out = recurrent("LSTM", emb, sub, batch_first=True, hidden_size=sub["weight_hh_l0"]
                        .shape[1])[0]
        return (_mm(out, p["head.weight"].T) + p["head.bias"],)
    if model.kind == "encoder":
        sub = {k.removeprefix("layer."): v for k, v in p.items()}
        return (encoder_layer(args[0], sub, nhead=2),)
    return (convnet(args[0], p),)
