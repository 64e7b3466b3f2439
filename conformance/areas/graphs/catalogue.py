"""The graphs area's workloads: what users capture, built twice from one seed (one copy to
capture, one to run eagerly), with the float64 oracle of one step (oracles/graph_workloads).

A workload's ``fn(*inputs)`` is one step: it reads its static inputs, may update its
persistent ``state`` tensors in place (an optimizer's, a running state's) and returns a
tuple of tensors. ``step_inputs(k)`` gives step k's input values; ``oracle(state, inputs,
work, rnd)`` is the step in numpy (outputs, new state).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from conformance.harness.tensors import exact_numpy, from_numpy
from oracles import graph_workloads as ow

LR = 1e-2
CAPTURABLE = ("cuda", "xpu")
DECAY = 0.9


@dataclass
class Workload:
    name: str
    fn: Callable[..., tuple[torch.Tensor, ...]]
    inputs: list[torch.Tensor]
    state: list[torch.Tensor] = field(default_factory=list)
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    grads: Callable[[], list[torch.Tensor | None]] = lambda: []
    seed: int = 0

    def step_inputs(self, k: int) -> list[np.ndarray]:
        """Step k's input values (float64, the dtype's values), the same on every copy."""
        rng = np.random.default_rng([self.seed, 7, k])
        return [rng.uniform(-1, 1, tuple(t.shape)) for t in self.inputs]

    def load_inputs(self, values: list[np.ndarray]) -> None:
        """Copy new values into the static inputs, in place."""
        for t, v in zip(self.inputs, values, strict=True):
            t.copy_(from_numpy(v, t.dtype, t.device))

    def snapshot(self) -> list[torch.Tensor]:
        return [t.detach().clone() for t in self.state]

    def restore(self, values: list[torch.Tensor]) -> None:
        with torch.no_grad():
            for t, v in zip(self.state, values, strict=True):
                t.copy_(v)


@dataclass(frozen=True)
class Spec:
    build: Callable[[torch.device, torch.dtype, int], Workload]
    oracle: Callable[..., tuple[list[np.ndarray], list[np.ndarray]]] | None
    needs: tuple[str, ...] = ()  # runtime features the workload exercises
    dtypes: tuple[str, ...] = ("float32", "bfloat16")
    doc: str = ""


def _weights(rng: np.random.Generator, *shapes: tuple[int, ...]) -> list[np.ndarray]:
    return [rng.uniform(-1, 1, s) / np.sqrt(s[-1]) for s in shapes]


def _tensors(values: list[np.ndarray], dtype: torch.dtype, device: torch.device
             ) -> list[torch.Tensor]:
    return [from_numpy(v, dtype, device) for v in values]


def _mlp(device: torch.device, dtype: torch.dtype, seed: int) -> Workload:
    rng = np.random.default_rng([seed, 1])
    w1, b1, w2, b2 = (exact_numpy(t) for t in _tensors(
        _weights(rng, (64, 32), (64,), (16, 64), (16,)), dtype, device))
    t1, tb1, t2, tb2 = _tensors([w1, b1, w2, b2], dtype, device)
    x = torch.zeros(8, 32, dtype=dtype, device=device)
    return Workload("mlp", lambda x: (F.linear(F.relu(F.linear(x, t1, tb1)), t2, tb2),), [x],
                    consts={"w1": w1, "b1": b1, "w2": w2, "b2": b2}, seed=seed)


def _mlp_oracle(c: dict[str, np.ndarray], state: list[np.ndarray], inputs: list[np.ndarray],
                work: type, rnd: Any) -> tuple[list[np.ndarray], list[np.ndarray]]:
    return [ow.mlp(inputs[0], c["w1"], c["b1"], c["w2"], c["b2"], work, rnd)], []


def _gemm(device: torch.device, dtype: torch.dtype, seed: int) -> Workload:
    a = torch.zeros(256, 256, dtype=dtype, device=device)
    b = torch.zeros(256, 256, dtype=dtype, device=device)
    return Workload("gemm", lambda a, b: (a @ b,), [a, b], seed=seed)


def _gemm_oracle(c: dict[str, np.ndarray], state: list[np.ndarray], inputs: list[np.ndarray],
                 work: type, rnd: Any) -> tuple[list[np.ndarray], list[np.ndarray]]:
    a, b = inputs
    return [ow.linear(a, b.T, np.zeros(b.shape[1]), work, rnd)], []


def _attention(device: torch.device, dtype: torch.dtype, seed: int) -> Workload:
    rng = np.random.default_rng([seed, 2])
    w_qkv, w_out = (exact_numpy(t) for t in _tensors(_weights(rng, (96, 32), (32, 32)),
                                                      dtype, device))
    tq, to = _tensors([w_qkv, w_out], dtype, device)

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        bsz, seq, emb = x.shape
        q, k, v = (t.reshape(bsz, seq, 2, emb // 2).transpose(1, 2)
                   for t in F.linear(x, tq).chunk(3, dim=-1))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return (F.linear(o.transpose(1, 2).reshape(bsz, seq, emb), to),)

    x = torch.zeros(2, 16, 32, dtype=dtype, device=device)
    return Workload("attention", fn, [x], consts={"w_qkv": w_qkv, "w_out": w_out}, seed=seed)


def _attention_oracle(c: dict[str, np.ndarray], state: list[np.ndarray],
                      inputs: list[np.ndarray], work: type, rnd: Any
                      ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    return [ow.attention_block(inputs[0], c["w_qkv"], c["w_out"], 2, work, rnd)], []


def _state_update(device: torch.device, dtype: torch.dtype, seed: int) -> Workload:
    rng = np.random.default_rng([seed, 3])
    (w,) = (exact_numpy(t) for t in _tensors(_weights(rng, (16, 32)), dtype, device))
    (tw,) = _tensors([w], dtype, device)
    state = from_numpy(rng.uniform(-1, 1, (8, 16)), dtype, device)

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        state.mul_(DECAY).add_(torch.tanh(F.linear(x, tw)), alpha=1 - DECAY)
        return (state,)

    x = torch.zeros(8, 32, dtype=dtype, device=device)
    return Workload("state_update", fn, [x], [state], consts={"w": w}, seed=seed)


def _state_oracle(c: dict[str, np.ndarray], state: list[np.ndarray], inputs: list[np.ndarray],
                  work: type, rnd: Any) -> tuple[list[np.ndarray], list[np.ndarray]]:
    new = ow.state_update(state[0], inputs[0], c["w"], DECAY, work, rnd)
    return [new], [new]


def _train_step(device: torch.device, dtype: torch.dtype, seed: int) -> Workload:
    """A tanh MLP, MSE loss, backward and Adam(capturable=True), its state made up front
    (so both copies have the same tensors to reset)."""
    rng = np.random.default_rng([seed, 4])
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 8))
    model = model.to(device=device, dtype=dtype)
    params = list(model.parameters())
    with torch.no_grad():
        for p, v in zip(params, _weights(rng, (32, 32), (32,), (8, 32), (8,)), strict=True):
            p.copy_(from_numpy(v, dtype, device))
    # the step count read on the device, never by .item() (which a graph would bake in):
    # capturable=True where torch allows it; on the CPU (which refuses capturable) the fused
    # kernel, which reads the count from its tensor (the CPU reference runtime's tape)
    opt = torch.optim.Adam(params, lr=LR, capturable=device.type in CAPTURABLE,
                           fused=True if device.type == "cpu" else None)
    for p in params:
        opt.state[p] = {"step": torch.zeros((), dtype=torch.float32, device=device),
                        "exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}

    def fn(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        for p in params:
            p.grad = None
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return (loss.detach(),)

    state = [*(p.data for p in params), *(opt.state[p]["exp_avg"] for p in params),
             *(opt.state[p]["exp_avg_sq"] for p in params), *(opt.state[p]["step"] for p in params)]
    inputs = [torch.zeros(16, 32, dtype=dtype, device=device),
              torch.zeros(16, 8, dtype=dtype, device=device)]
    return Workload("train_step", fn, inputs, state, grads=lambda: [p.grad for p in params],
                    seed=seed)


def train_oracle(state: list[np.ndarray], inputs: list[np.ndarray], work: type, rnd: Any,
                 grads: list[np.ndarray] | None = None
                 ) -> tuple[float, list[np.ndarray], list[np.ndarray]]:
    """(loss, grads, new state) of one training step from ``state``; with ``grads`` given,
    the optimizer step applies those (the eager copy's own) instead of the oracle's."""
    params, m, v, steps = state[:4], state[4:8], state[8:12], state[12:]
    loss, g = ow.tanh_mlp_loss_grads(inputs[0], inputs[1], params, work, rnd)
    p2, m2, v2, t = ow.adam_step(params, grads if grads is not None else g, m, v,
                                 float(steps[0]), LR, work, rnd)
    return loss, g, [*p2, *m2, *v2, *(np.asarray(t) for _ in steps)]


def _random_ops(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """dropout first, rand_like second (dropout_sanity checks those two); then the other
    kinds of draw torch's graph RNG tests cover: normal, bernoulli, an in-place sampler."""
    return (F.dropout(x, 0.5, training=True), torch.rand_like(x), torch.randn_like(x),
            torch.bernoulli(torch.full_like(x, 0.3)), torch.empty_like(x).exponential_())


def _dropout(device: torch.device, dtype: torch.dtype, seed: int) -> Workload:
    x = torch.zeros(64, 64, dtype=dtype, device=device)
    return Workload("dropout", _random_ops, [x], seed=seed)


def _side_stream(device: torch.device, dtype: torch.dtype, seed: int) -> Workload:
    module = torch.get_device_module(device)

    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        side = module.Stream()
        side.wait_stream(module.current_stream())
        with module.stream(side):
            prod = a @ b
        t = torch.tanh(a)
        module.current_stream().wait_stream(side)
        return (prod + t,)

    a = torch.zeros(64, 64, dtype=dtype, device=device)
    b = torch.zeros(64, 64, dtype=dtype, device=device)
    return Workload("side_stream", fn, [a, b], seed=seed)


def _side_oracle(c: dict[str, np.ndarray], state: list[np.ndarray], inputs: list[np.ndarray],
                 work: type, rnd: Any) -> tuple[list[np.ndarray], list[np.ndarray]]:
    a, b = inputs
    prod = ow.linear(a, b.T, np.zeros(b.shape[1]), work, rnd)
    t = rnd(np.tanh(a.astype(work)).astype(np.float64))
    return [rnd((prod.astype(work) + t.astype(work)).astype(np.float64))], []


WORKLOADS: dict[str, Spec] = {
    "mlp": Spec(_mlp, _mlp_oracle, doc="an MLP forward (two linears and a relu)"),
    "train_step": Spec(_train_step, None, ("training",), ("float32",),
                       "forward, backward and Adam(capturable=True; fused on the CPU) in one step"),
    "attention": Spec(_attention, _attention_oracle,
                      doc="a causal SDPA block (qkv projection, SDPA, out projection)"),
    "state_update": Spec(_state_update, _state_oracle,
                         doc="an in-place update of a persistent state tensor"),
    "gemm": Spec(_gemm, _gemm_oracle, doc="a 256^3 GEMM (a BLAS library's workspace)"),
    "side_stream": Spec(_side_stream, _side_oracle, ("streams",),
                        doc="a GEMM forked to a side stream inside the capture, joined back"),
}
RANDOM = Spec(_dropout, None, ("rng",),
              doc="dropout, rand_like, randn_like, bernoulli, exponential_ (graph-safe RNG)")
