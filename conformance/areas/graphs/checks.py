"""The graphs area's checks: replay against eager bit for bit, eager against the float64
oracle with the error-ratio rule.

Error-ratio rule (the same form as the export area's): for each output and state tensor,
over the steps of a case,

    max_k max|eager_k - ref_k| <= 2 max_k max|base_k - ref_k| + eps max_k max|ref_k|,

with ref the oracle in float64 and base the same numpy step in float32 with every stored
intermediate rounded to the case's dtype (a same-precision implementation that rounds at
least wherever a kernel stores; oracles/graph_workloads.py). eps is one rounding step of the
dtype at the largest reference value (torch.finfo(dtype).eps). It certifies that the eager
step is as accurate as a straightforward implementation in the dtype: a wrong kernel, a
skipped update or a stale input is off by far more. Runtimes whose replays run other kernels
(``same_kernels`` False: torch.compile) are held to this rule instead of bit equality.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from conformance.areas.graphs.catalogue import Workload, train_oracle
from conformance.harness.compare import Measurement, exact
from conformance.harness.record import Record
from conformance.harness.tensors import dtype_name, exact_numpy, rounded

RATIO = 2.0


def bits(name: str, got: Sequence[torch.Tensor], want: Sequence[torch.Tensor],
         detail: str = "") -> Measurement:
    """Elements that differ bit for bit (NaN equals NaN), over all tensors."""
    bad, total, where = 0, 0, []
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        total += w.numel()
        if g.shape != w.shape or g.dtype != w.dtype:
            bad += w.numel()
            where.append(f"#{i}: {tuple(g.shape)} {g.dtype} vs {tuple(w.shape)} {w.dtype}")
            continue
        diff = (g != w) & ~(torch.isnan(g) & torch.isnan(w)) if g.is_floating_point() \
            else g != w
        n = int(diff.sum())
        if n:
            bad += n
            d = (g.double() - w.double()).abs().max().item() if g.is_floating_point() else n
            where.append(f"#{i}: {n} of {w.numel()} (max |diff| {d:.3g})")
    return exact(name, bad, total, "; ".join(where) + (f"; {detail}" if detail else ""))


def _np(ts: Sequence[torch.Tensor | None]) -> list[np.ndarray]:
    return [exact_numpy(t) if t is not None else np.zeros(0) for t in ts]


def _rounder(dtype: torch.dtype):
    name = dtype_name(dtype)
    return (lambda x: x) if name == "float32" else (lambda x: rounded(x, name))


def _errors(got: np.ndarray, ref: np.ndarray, base: np.ndarray) -> tuple[float, float, float]:
    err = float(np.max(np.abs(got - ref), initial=0.0)) if np.all(np.isfinite(got)) \
        else float("inf")
    return err, float(np.max(np.abs(base - ref), initial=0.0)), \
        float(np.max(np.abs(ref), initial=0.0))


def step_errors(spec_oracle, w: Workload, dtype: torch.dtype,
                before: list[np.ndarray], inputs: list[np.ndarray],
                outputs: Sequence[torch.Tensor]) -> dict[str, tuple[float, float, float]]:
    """One step's (max|got - ref|, max|base - ref|, max|ref|) per output and state tensor
    (``w.state`` now holds the new state); for the training step the loss and gradients,
    then Adam applied to the step's own gradients."""
    rnd, same = _rounder(dtype), (lambda x: x)
    out: dict[str, tuple[float, float, float]] = {}
    if spec_oracle is None:
        loss, grads, _ = train_oracle(before, inputs, np.float64, same)
        bloss, bgrads, _ = train_oracle(before, inputs, np.float32, rnd)
        got_g = _np(w.grads())
        out["loss"] = _errors(exact_numpy(outputs[0]), np.asarray(loss), np.asarray(bloss))
        for i, (g, r, b) in enumerate(zip(got_g, grads, bgrads, strict=True)):
            out[f"gradient {i}"] = _errors(g, r, b)
        _, _, ref_state = train_oracle(before, inputs, np.float64, same, got_g)
        _, _, base_state = train_oracle(before, inputs, np.float32, rnd, got_g)
    else:
        ref_out, ref_state = spec_oracle(w.consts, before, inputs, np.float64, same)
        base_out, base_state = spec_oracle(w.consts, before, inputs, np.float32, rnd)
        for i, (g, r, b) in enumerate(zip(_np(outputs), ref_out, base_out, strict=True)):
            out[f"output {i}"] = _errors(g, r, b)
    for i, (g, r, b) in enumerate(zip(_np(w.state), ref_state, base_state, strict=True)):
        out[f"state {i}"] = _errors(g, r, b)
    return out


class OracleJudge:
    """The error-ratio rule over a run of steps: per tensor, the worst step's error against
    2 x the largest baseline error of all steps + eps x the largest |ref| (the baseline's
    error pooled over the steps: one small tensor's baseline error, a scalar loss's above
    all, can be near zero by chance)."""

    def __init__(self, dtype: torch.dtype, label: str) -> None:
        self.dtype, self.label = dtype, label
        self.steps: list[tuple[int, dict[str, tuple[float, float, float]]]] = []

    def add(self, k: int, errors: dict[str, tuple[float, float, float]]) -> None:
        self.steps.append((k, errors))

    def judge(self, record: Record) -> None:
        if not self.steps:
            return
        eps = torch.finfo(self.dtype).eps
        for name in self.steps[0][1]:
            k, (err, _, _) = max(((k, e[name]) for k, e in self.steps), key=lambda x: x[1][0])
            base = max(e[name][1] for _, e in self.steps)
            atol = eps * max(e[name][2] for _, e in self.steps)
            record.require(Measurement(
                f"{self.label}: {name} (error ratio rule)", err, RATIO * base + atol,
                f"worst at step {k}: max|got - ref| {err:.3g}; max|base - ref| over "
                f"{len(self.steps)} steps {base:.3g} (x{RATIO:g} + eps max|ref| {atol:.3g})"))


def dropout_sanity(record: Record, x: torch.Tensor, out: torch.Tensor, rand: torch.Tensor
                   ) -> None:
    """An eager dropout(p=0.5) keeps each element as 2x or zeroes it, keeping a
    Binomial(n, 1/2) count (two-sided, family-wise alpha 1e-6 over the area's draws);
    rand_like is in [0, 1)."""
    from scipy import stats

    kept = out != 0
    wrong = int(((out != 2 * x) & kept).sum())
    record.require(exact("dropout keeps 2x or zero", wrong, x.numel()))
    n, k = x.numel(), int(kept.sum())
    p = float(stats.binomtest(k, n, 0.5).pvalue)
    record.require(Measurement("dropout keeps half (binomial p-value >= 1e-6)",
                               -np.log10(max(p, 1e-300)), 6.0, f"kept {k} of {n}, p = {p:.3g}"))
    outside = int(((rand < 0) | (rand >= 1)).sum())
    record.require(exact("rand_like in [0, 1)", outside, rand.numel()))
