"""Planted export round trips (the issue's list), plugged in through
``--impl export=planted.export_faults:<name>``, and their correct twin. Each is
``torch.export`` with one deliberate mistake; at the example size most of them look fine."""

from __future__ import annotations

import copy
from typing import Any

import torch

from impls.export import Program, dynamic_dims, exported


def _declare(fn: Any) -> Any:
    fn.conformance_name = fn.__name__
    fn.conformance_dtypes = ["float32"]
    fn.conformance_features = ["dynamic.batch", "dynamic.seq"]
    return fn


def _batch_dims(dynamic_shapes: Any) -> list[int | None]:
    """Per input, the dim the test named "batch" (None where there is none)."""
    out = []
    for spec in (dynamic_shapes or {}).values():
        dims = [i for i, d in (spec or {}).items() if getattr(d, "__name__", "") == "batch"]
        out.append(dims[0] if dims else None)
    return out


@_declare
def correct(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    ep = exported(module, args, dynamic_shapes)
    return Program(ep.module(), dynamic_dims(ep))


@_declare
def specialised_batch(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Exports at the example batch only and fakes the others: rows cycled in, rows
    cycled out. Right at the example's batch, wrong at every other."""
    dims = _batch_dims(dynamic_shapes)
    ep = exported(module, args, None)
    run = ep.module()
    pairs = enumerate(zip(args, dims, strict=False))
    example = {i: a.shape[d] for i, (a, d) in pairs if d is not None}

    def call(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if not example:
            return run(*xs)
        n = next(x.shape[d] for x, d in zip(xs, dims, strict=False) if d is not None)
        fitted = [x.index_select(d, torch.arange(example[i], device=x.device) % n)
                  if d is not None else x for i, (x, d) in enumerate(zip(xs, dims, strict=False))]
        outs = run(*fitted)
        b0 = next(iter(example.values()))
        return tuple(o.index_select(d, torch.arange(n, device=o.device) % b0)
                     for o, d in zip(outs, [dims[0], *[1] * (len(outs) - 1)], strict=False))

    return Program(call, None)


@_declare
def zero_initial_state(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Drops the initial states: every input after the first becomes zeros."""
    ep = exported(module, args, dynamic_shapes)
    run = ep.module()
    return Program(lambda x, *states: run(x, *(torch.zeros_like(s) for s in states)),
                   dynamic_dims(ep))


@_declare
def swapped_directions(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Swaps the forward and reverse weights of every bidirectional layer."""
    module = copy.deepcopy(module)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "_reverse" in name:
                twin = dict(module.named_parameters())[name.replace("_reverse", "")]
                tmp = p.clone()
                p.copy_(twin)
                twin.copy_(tmp)
    return correct(module, args, dynamic_shapes)


@_declare
def float16_inside(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Computes in float16 behind a float32 interface."""
    half = copy.deepcopy(module).half()
    ep = exported(half, tuple(a.half() if a.is_floating_point() else a for a in args),
                  dynamic_shapes)
    run = ep.module()

    def call(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outs = run(*(x.half() if x.is_floating_point() else x for x in xs))
        return tuple(o.float() for o in outs)

    return Program(call, dynamic_dims(ep))


@_declare
def gru_gates_swapped(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Swaps a GRU's reset and update gates (rows r and z of every weight and bias)."""
    module = copy.deepcopy(module)
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, torch.nn.GRU):
                for p in sub.parameters():
                    r, z, n = p.chunk(3, 0)
                    p.copy_(torch.cat([z, r, n], 0))
    return correct(module, args, dynamic_shapes)


@_declare
def refuses_other_batches(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Exports statically (the example's batch only) while declaring dynamic.batch: a
    clear error at every other batch, where the program was asked to accept them."""
    ep = exported(module, args, None)
    return Program(ep.module(), dynamic_dims(ep))


# the round trips of tests/test_export_faults.py: float32, dynamic batch, an LSTM with initial
# states and a bidirectional GRU; each fault on the models it must be flagged on there (on
# the others it is a no-op)
_ROUNDTRIP = "test_roundtrip and float32"
_BOTH, _GRU_BI = "(lstm-batch or gru_bi-batch)", "gru_bi-batch"
SELFTEST = [  # torch-conformance selftest (conformance/cli/selftest.py)
    *({"area": "export", "impl": name, "path": "export/test_export.py", "expect": "killed",
       "select": f"{name} and {_ROUNDTRIP} and {models}"}
      for name, models in (("specialised_batch", _BOTH), ("zero_initial_state", _BOTH),
                           ("swapped_directions", _GRU_BI), ("float16_inside", _BOTH),
                           ("gru_gates_swapped", _GRU_BI), ("refuses_other_batches", _BOTH))),
    {"area": "export", "impl": "correct", "path": "export/test_export.py", "expect": "passes",
     "select": f"correct and {_ROUNDTRIP} and {_BOTH}"},
]


# ---- faults of the fresh-process rule, the size past a Dim's max and the new shapes --------
# (tests/test_export_shape_faults.py)

_LIB: Any = None  # the building process's registry: filled at build, empty in any other


def _register_same() -> None:
    global _LIB
    if _LIB is None:
        _LIB = torch.library.Library("conformance_planted", "DEF")
        _LIB.define("same(Tensor x) -> Tensor")
        _LIB.impl("same", lambda x: x.clone(), "CompositeExplicitAutograd")
        _LIB._register_fake("same", lambda x: torch.empty_like(x))


class _ThroughRegistry(torch.nn.Module):
    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor, *rest: torch.Tensor) -> Any:
        return self.inner(torch.ops.conformance_planted.same(x), *rest)


@_declare
def saved_needs_builder(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """``export.saved`` of a program that calls an op registered at build time in the
    building process only: it loads and runs there, not in a fresh process."""
    from impls.export import export_saved

    _register_same()
    spec = dynamic_shapes if dynamic_shapes is None else {
        "x": next(iter(dynamic_shapes.values())), "rest": tuple(dynamic_shapes.values())[1:]}
    return export_saved(_ThroughRegistry(module), args, spec)


@_declare
def saved_correct(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """The correct twin: ``impls.export:export_saved`` as shipped."""
    from impls.export import export_saved

    return export_saved(module, args, dynamic_shapes)


@_declare
def answers_past_max(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """What an unchecked AOTInductor package does past a Dim's max: a batch over the max
    runs on the example's rows and answers with the example's shape (no error)."""
    ep = exported(module, args, dynamic_shapes)
    run, dims = ep.module(), _batch_dims(dynamic_shapes)

    def call(*xs: torch.Tensor) -> Any:
        if any(d is not None and x.shape[d] > 64 for x, d in zip(xs, dims, strict=False)):
            xs = tuple(x if d is None else x.narrow(d, 0, a.shape[d])
                       for x, d, a in zip(xs, dims, args, strict=False))
        return run(*xs)

    return Program(call, dynamic_dims(ep))


@_declare
def unbatched_as_batch1(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Answers an unbatched input (x of 2 dims) as a batch of one and keeps that batch dim."""
    if args[0].dim() != 2:
        return correct(module, args, dynamic_shapes)
    lifted = tuple(a.unsqueeze(1) for a in args)  # seq-first: x (S, 1, F), h0 (L, 1, H)
    ep = exported(module, lifted, None)
    run = ep.module()
    return Program(lambda *xs: run(*(x.unsqueeze(1) for x in xs)), dynamic_dims(ep))


@_declare
def bias_false_given_biases(module: torch.nn.Module, args: tuple, dynamic_shapes: Any
                            ) -> Program:
    """Rebuilds a bias=False recurrent module with biases (weights copied, the biases left at
    their default initialisation instead of zeros)."""
    module = copy.deepcopy(module)
    for name, sub in list(module.named_children()):
        if isinstance(sub, torch.nn.RNNBase) and not sub.bias:
            kw = {"input_size": sub.input_size, "hidden_size": sub.hidden_size,
                  "num_layers": sub.num_layers, "batch_first": sub.batch_first,
                  "bidirectional": sub.bidirectional}
            biased = type(sub)(**kw, bias=True).to(next(sub.parameters()).dtype).eval()
            biased.load_state_dict(sub.state_dict(), strict=False)
            setattr(module, name, biased)
    return correct(module, args, dynamic_shapes)
