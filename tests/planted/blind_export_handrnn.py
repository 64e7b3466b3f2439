"""The blind export round trips' machinery: tracing and exporting helpers and a hand-written
RNN built from a module's parameters and torch's documented equations, whose options are
the converter faults (the catalogue and how it was written: ``blind_export_roundtrips.py``)."""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from impls.export import Program, dynamic_dims, exported


def _declare(fn: Any) -> Any:
    fn.conformance_name = fn.__name__
    fn.conformance_dtypes = ["float32"]
    fn.conformance_features = ["dynamic.batch", "dynamic.seq"]
    return fn


def _named_dims(dynamic_shapes: Any, name: str) -> list[tuple[int | None, Any]]:
    """Per input (in order), the dim the caller named ``name`` and its Dim (or None)."""
    out: list[tuple[int | None, Any]] = []
    for spec in (dynamic_shapes or {}).values():
        hits = [(i, d) for i, d in (spec or {}).items() if getattr(d, "__name__", "") == name]
        out.append(hits[0] if hits else (None, None))
    return out


def _traced(module: nn.Module, args: tuple, dynamic_shapes: Any) -> tuple[Any, Any]:
    """The program the faults wrap: torch.export -> .module(), or, where torch.export cannot
    keep a "seq" dim dynamic (nn.RNN has no while-loop decomposition), the module itself
    (a copy), so that a fault's verdict is about the fault and not that limitation."""
    try:
        ep = exported(module, args, dynamic_shapes)
    except torch._dynamo.exc.UserError:
        if not any(d is not None for d, _ in _named_dims(dynamic_shapes, "seq")):
            raise
        frozen = copy.deepcopy(module)

        def run(*xs: torch.Tensor) -> Any:
            with torch.no_grad():
                return frozen(*xs)

        return run, None
    return ep.module(), dynamic_dims(ep)


def _export_program(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    return Program(*_traced(module, args, dynamic_shapes))


def _as_tuple(out: Any) -> tuple[torch.Tensor, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


# --------------------------------------------------------------------------------------
# A hand-written recurrence (RNN / LSTM with proj_size / GRU, layers, directions), from the
# module's parameters and torch's documented equations; the options are the faults.


class _HandRNN(nn.Module):
    def __init__(self, rnn: nn.RNNBase, *, gru_reset_before_matmul: bool = False,
                 reverse_unflipped: bool = False, direction_major_states: bool = False) -> None:
        super().__init__()
        self.mode = rnn.mode
        self.L, self.D = rnn.num_layers, 2 if rnn.bidirectional else 1
        self.batch_first = rnn.batch_first
        self.H = rnn.hidden_size
        self.P = getattr(rnn, "proj_size", 0) or 0
        self.p = {k: v.detach().clone() for k, v in rnn.named_parameters()}
        self.gru_reset_before_matmul = gru_reset_before_matmul
        self.reverse_unflipped = reverse_unflipped
        self.direction_major_states = direction_major_states

    def _order(self, states: torch.Tensor) -> torch.Tensor:
        """Layer-major (torch's order) from direction-major, when the fault is on."""
        if not self.direction_major_states or self.D == 1 or self.L == 1:
            return states
        idx = [d * self.L + layer for layer in range(self.L) for d in range(self.D)]
        return states[idx]

    def _cell(self, x_proj: torch.Tensor, h: torch.Tensor, c: torch.Tensor | None,
              w_hh: torch.Tensor, b_hh: torch.Tensor | None, w_hr: torch.Tensor | None):
        hh = h @ w_hh.t()
        if b_hh is not None:
            hh = hh + b_hh
        if self.mode == "LSTM":
            i, f, g, o = (x_proj + hh).chunk(4, -1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            if w_hr is not None:
                h = h @ w_hr.t()
            return h, c
        if self.mode == "GRU":
            xr, xz, xn = x_proj.chunk(3, -1)
            hr, hz, hn = hh.chunk(3, -1)
            r = torch.sigmoid(xr + hr)
            z = torch.sigmoid(xz + hz)
            if self.gru_reset_before_matmul:
                w_hn = w_hh.chunk(3, 0)[2]
                b_hn = b_hh.chunk(3, 0)[2] if b_hh is not None else 0
                n = torch.tanh(xn + (r * h) @ w_hn.t() + b_hn)
            else:
                n = torch.tanh(xn + r * hn)
            return (1 - z) * n + z * h, None
        act = torch.tanh if self.mode == "RNN_TANH" else torch.relu
        return act(x_proj + hh), None

    def forward(self, x: torch.Tensor, hx: Any = None):
        unbatched = x.dim() == 2
        if unbatched:
            x = x.unsqueeze(1)
        elif self.batch_first:
            x = x.transpose(0, 1)
        T, B = x.shape[0], x.shape[1]
        hsize = self.P or self.H
        if self.mode == "LSTM":
            h0, c0 = hx if hx is not None else (None, None)
        else:
            h0, c0 = hx, None
        if h0 is not None and unbatched:
            h0 = h0.unsqueeze(1)
            c0 = c0.unsqueeze(1) if c0 is not None else None
        if h0 is None:
            h0 = x.new_zeros(self.L * self.D, B, hsize)
        if self.mode == "LSTM" and c0 is None:
            c0 = x.new_zeros(self.L * self.D, B, self.H)
        h0 = self._order(h0)
        c0 = self._order(c0) if c0 is not None else None
        hn, cn = [], []
        layer_in = x
        for layer in range(self.L):
            outs = []
            for d in range(self.D):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                w_ih, w_hh = self.p["weight_ih" + sfx], self.p["weight_hh" + sfx]
                b_ih, b_hh = self.p.get("bias_ih" + sfx), self.p.get("bias_hh" + sfx)
                w_hr = self.p.get("weight_hr" + sfx)
                xp = layer_in @ w_ih.t()
                if b_ih is not None:
                    xp = xp + b_ih
                k = layer * self.D + d
                h = h0[k]
                c = c0[k] if c0 is not None else None
                steps = range(T - 1, -1, -1) if d else range(T)
                ys: list[torch.Tensor | None] = [None] * T
                for n_step, t in enumerate(steps):
                    h, c = self._cell(xp[t], h, c, w_hh, b_hh, w_hr)
                    ys[n_step if (d and self.reverse_unflipped) else t] = h
                outs.append(torch.stack(ys))  # type: ignore[arg-type]
                hn.append(h)
                if c is not None:
                    cn.append(c)
            layer_in = torch.cat(outs, -1) if self.D == 2 else outs[0]
        out = layer_in
        h_n = self._order_back(torch.stack(hn))
        c_n = self._order_back(torch.stack(cn)) if cn else None
        if unbatched:
            out, h_n = out.squeeze(1), h_n.squeeze(1)
            c_n = c_n.squeeze(1) if c_n is not None else None
        elif self.batch_first:
            out = out.transpose(0, 1)
        return out, ((h_n, c_n) if self.mode == "LSTM" else h_n)

    def _order_back(self, states: torch.Tensor) -> torch.Tensor:
        """Direction-major out of torch's layer-major order, when the fault is on."""
        if not self.direction_major_states or self.D == 1 or self.L == 1:
            return states
        idx = [layer * self.D + d for d in range(self.D) for layer in range(self.L)]
        return states[idx]


def _with_hand_rnns(module: nn.Module, **options: bool) -> nn.Module:
    """A copy of ``module`` whose RNN / LSTM / GRU submodules are hand-written ones."""
    module = copy.deepcopy(module)
    for name, sub in list(module.named_modules()):
        if isinstance(sub, nn.RNNBase):
            parent_name, _, attr = name.rpartition(".")
            parent = module.get_submodule(parent_name) if parent_name else module
            setattr(parent, attr, _HandRNN(sub, **options))
    return module.eval()


def _eager_program(module: nn.Module) -> Program:
    def run(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        with torch.no_grad():
            return _as_tuple(module(*xs))
    return Program(run, None)
