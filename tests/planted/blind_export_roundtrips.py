"""Blind planted export round trips, written from the implementation contract
(impls/export.py), upstream docs and bug reports only, without reading the area's checks.
Plug one in with ``--impl export=planted.blind_export_roundtrips:<name>``.

Each fault is a mistake a real deployment path could make (a converter, a runtime, a
serving wrapper around an exported program); most of them give the right numbers at the
example's size and go wrong only at some sizes, some inputs, or outside the process.
``correct``, ``outside_jit_trace`` and ``outside_handwritten`` are correct and must pass.
``TODAY`` at the bottom records what the suite said about each when this file was written.
"""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from impls.export import Program, _artefact, dynamic_dims, exported

from .blind_export_handrnn import (
    _as_tuple,
    _declare,
    _eager_program,
    _export_program,
    _named_dims,
    _traced,
    _with_hand_rnns,
)

# --------------------------------------------------------------------------------------
# correct ones


@_declare
def correct(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """torch.export (non-strict) -> .module(): the twin the faults are measured against."""
    ep = exported(module, args, dynamic_shapes)
    return Program(ep.module(), dynamic_dims(ep))


@_declare
def outside_jit_trace(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Outside path: ``torch.jit.trace``, ``torch.jit.save`` into a buffer, ``torch.jit.load``
    back (TorchScript keeps aten::lstm / aten::gru, so any batch and length run)."""
    with torch.no_grad():
        traced = torch.jit.trace(copy.deepcopy(module), args, check_trace=False)
    buf = io.BytesIO()
    torch.jit.save(traced, buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    return _eager_program(loaded)


@_declare
def outside_handwritten(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Outside path: the recurrences re-implemented by hand from the module's parameters
    (torch's documented LSTM / GRU / Elman equations), the rest of the model eager."""
    return _eager_program(_with_hand_rnns(module))


# --------------------------------------------------------------------------------------
# faults: the module handed in is changed


def _permute_gates_onnx(p: torch.Tensor, mode: str) -> torch.Tensor:
    if mode == "LSTM":  # torch i f g o -> ONNX i o f c
        i, f, g, o = p.chunk(4, 0)
        return torch.cat([i, o, f, g], 0)
    if mode == "GRU":  # torch r z n -> ONNX z r h
        r, z, n = p.chunk(3, 0)
        return torch.cat([z, r, n], 0)
    return p


@_declare
def gates_reordered_in_place(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """A converter that reorders the gate rows into ONNX's layout (LSTM iofc, GRU zrh, as
    torch.onnx's symbolic_opset does on copies) in place on the caller's module, then
    exports it for the torch program: the program and the now-mutated module agree with each
    other and not with the model that was handed in."""
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, nn.RNNBase) and sub.mode in ("LSTM", "GRU"):
                for name, p in sub.named_parameters():
                    if name.startswith(("weight_ih", "weight_hh", "bias_")):
                        p.copy_(_permute_gates_onnx(p, sub.mode))
    return _export_program(module, args, dynamic_shapes)


@_declare
def half_roundtrip_in_place(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """``nn.Module.half()`` is in place: a path that writes a float16 artefact with
    ``module.half()`` and "restores" with ``module.float()`` leaves the caller's weights
    rounded to float16; the float32 program is then exported from the rounded module
    (nn.Module.half / .float, documented: "This method modifies the module in-place")."""
    module.half()
    module.float()
    return _export_program(module, args, dynamic_shapes)


# --------------------------------------------------------------------------------------
# faults: converter arithmetic


@_declare
def gru_bias_merged(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """A converter to a single-bias RNN layout (TFLite / Keras ``reset_after=False``)
    folds ``b_hh`` into ``b_ih``: exact for LSTM and for the GRU's r and z gates, wrong
    for the GRU's n gate, where ``b_hn`` sits inside ``r * (W_hn h + b_hn)`` (the same
    b_hn mistake: google/flax#5595, ml-explore/mlx#3252)."""
    module = copy.deepcopy(module)
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, nn.GRU) and sub.bias:
                for name, b_hh in sub.named_parameters():
                    if name.startswith("bias_hh"):
                        getattr(sub, name.replace("bias_hh", "bias_ih")).add_(b_hh)
                        b_hh.zero_()
    return _export_program(module, args, dynamic_shapes)


@_declare
def gru_reset_before_matmul(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """GRU decomposed with the reset gate applied before the hidden matmul,
    ``tanh(W_in x + b_in + W_hn (r * h) + b_hn)`` (ONNX ``linear_before_reset=0``, Keras
    ``reset_after=False``), where torch computes ``r * (W_hn h + b_hn)``
    (pytorch/pytorch#189225, microsoft/onnxscript#2852)."""
    return _eager_program(_with_hand_rnns(module, gru_reset_before_matmul=True))


@_declare
def bidir_reverse_unflipped(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Bidirectional RNN decomposed by hand: the reverse direction's outputs are stored in
    processing order (not flipped back to time order) before the concat. The final states
    h_n are right; only the per-step output's second half is reversed in time
    (webmachinelearning/webnn-baseline#123, sbillburg/CRNN-with-STN#12)."""
    return _eager_program(_with_hand_rnns(module, reverse_unflipped=True))


@_declare
def states_direction_major(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Initial and final states laid out direction-major (all forward layers, then all
    reverse layers) where torch is layer-major (l0, l0 reverse, l1, ...): identical for
    one layer or one direction, wrong for a stacked bidirectional RNN (the ambiguity of
    OpenNMT/OpenNMT-py#61, documented by pytorch/pytorch#7669)."""
    return _eager_program(_with_hand_rnns(module, direction_major_states=True))


def _tf32(t: torch.Tensor) -> torch.Tensor:
    """Round float32 to TF32 (10-bit mantissa, round to nearest)."""
    if t.dtype != torch.float32:
        return t
    i = t.contiguous().view(torch.int32)
    return ((i + 0x1000) & ~0x1FFF).view(torch.float32).view(t.shape)


class _TF32Matmuls(TorchDispatchMode):
    _OPS: ClassVar[set[Any]] = {
        torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default,
        torch.ops.aten.baddbmm.default, torch.ops.aten.convolution.default}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self._OPS:
            args = tuple(_tf32(a) if isinstance(a, torch.Tensor) else a for a in args)
        return func(*args, **kwargs)


@_declare
def tf32_matmuls(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """float32 asked, TF32 computed: every matmul / conv operand rounded to a 10-bit
    mantissa (what ``allow_tf32`` / ``set_float32_matmul_precision("high")`` does on
    Ampere+, pytorch/pytorch#67384: TF32 on by default surprised users)."""
    run, dims = _traced(module, args, dynamic_shapes)

    def call(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        with _TF32Matmuls():
            return _as_tuple(run(*xs))

    return Program(call, dims)


# --------------------------------------------------------------------------------------
# faults: a serving wrapper around a correct program


@_declare
def chunked_state_reset(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Streaming wrapper: sequences longer than 64 steps are run in windows of 64, each
    window from the caller's initial state instead of the previous window's final state
    (the state is not carried; ARM-software/CMSIS-NN#219, openvinotoolkit/openvino#735).
    Exact up to 64 steps."""
    run, dims = _traced(module, args, dynamic_shapes)
    seq = _named_dims(dynamic_shapes, "seq")
    d0 = seq[0][0] if seq else None

    def call(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if d0 is None or xs[0].shape[d0] <= 64:
            return _as_tuple(run(*xs))
        T = xs[0].shape[d0]
        pieces = []
        for s in range(0, T, 64):
            n = min(64, T - s)
            pieces.append(_as_tuple(run(xs[0].narrow(d0, s, n), *xs[1:])))
        outs = []
        for k, last in enumerate(pieces[-1]):
            if last.dim() > d0 and all(p[k].shape[d0] == min(64, T - 64 * j)
                                       for j, p in enumerate(pieces)):
                outs.append(torch.cat([p[k] for p in pieces], d0))
            else:
                outs.append(last)
        return tuple(outs)

    return Program(call, dims)


@_declare
def batch_split_first_states(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Batches over 32 are split into micro-batches of 32 (a memory cap); the inputs are
    sliced along their batch dims, but the initial states passed along are the first
    micro-batch's rows every time. Exact for models without state inputs."""
    run, dims = _traced(module, args, dynamic_shapes)
    dims = [d for d, _ in _named_dims(dynamic_shapes, "batch")]

    def call(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if not dims or dims[0] is None or xs[0].shape[dims[0]] <= 32:
            return _as_tuple(run(*xs))
        B = xs[0].shape[dims[0]]
        pieces = []
        for s in range(0, B, 32):
            n = min(32, B - s)
            part = [x if d is None else x.narrow(d, s, n) if k == 0 else x.narrow(d, 0, n)
                    for k, (x, d) in enumerate(zip(xs, dims, strict=False))]
            pieces.append(_as_tuple(run(*part)))
        out_dims = [dims[0], *[1] * (len(pieces[0]) - 1)]
        return tuple(torch.cat([p[k] for p in pieces], d) for k, d in enumerate(out_dims))

    return Program(call, dims)


@_declare
def clamps_to_max(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Above a Dim's max, instead of refusing: sequences are truncated to their last
    ``max`` steps (a tokenizer's ``truncation=True``) and the missing outputs zero-filled;
    batches are cut to ``max`` rows and the rest zero-filled. Right numbers inside the range."""
    run, dims = _traced(module, args, dynamic_shapes)
    seq = _named_dims(dynamic_shapes, "seq")
    bat = _named_dims(dynamic_shapes, "batch")

    def _limit(spec: list[tuple[int | None, Any]]) -> tuple[int | None, int | None]:
        if not spec or spec[0][0] is None:
            return None, None
        d, dim = spec[0]
        return d, getattr(dim, "max", None)

    sd, smax = _limit(seq)
    bd, bmax = _limit(bat)

    def call(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        xs = list(xs)
        pad_seq = pad_batch = 0
        if sd is not None and smax is not None and xs[0].shape[sd] > smax:
            pad_seq = xs[0].shape[sd] - smax
            xs[0] = xs[0].narrow(sd, pad_seq, smax)
        if bd is not None and bmax is not None and xs[0].shape[bd] > bmax:
            pad_batch = xs[0].shape[bd] - bmax
            xs = [x.narrow(d, 0, bmax) if d is not None else x
                  for x, (d, _) in zip(xs, bat, strict=False)]
        outs = list(_as_tuple(run(*xs)))
        if pad_seq:
            o = outs[0]
            shape = list(o.shape)
            shape[sd] = pad_seq
            outs[0] = torch.cat([o.new_zeros(shape), o], sd)
        if pad_batch:
            for k, o in enumerate(outs):
                d = bd if k == 0 else 1
                shape = list(o.shape)
                shape[d] = pad_batch
                outs[k] = torch.cat([o, o.new_zeros(shape)], d)
        return tuple(outs)

    return Program(call, dims)


_STRUCTURE_CACHE: dict[str, Program] = {}


@_declare
def cache_by_structure(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """A compile cache keyed by the model's architecture (its repr), the input specs and the
    dynamic shapes, not by its weights: a second model of the same architecture with
    other weights gets the first one's program (stale weights behind a compiled artefact:
    pytorch/pytorch#129362)."""
    key = f"{module!r}|{dynamic_shapes!r}|" + "|".join(
        f"{tuple(a.shape)}{a.dtype}" for a in args)
    if key not in _STRUCTURE_CACHE:
        _STRUCTURE_CACHE[key] = _export_program(module, args, dynamic_shapes)
    return _STRUCTURE_CACHE[key]


@_declare
def cache_by_data_ptr(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """A result cache keyed by the inputs' (data_ptr, shape) instead of their content (a
    binding cache): when the allocator hands a new input the address of an old one, the
    old result comes back (tensorflow/tensorflow#56218: a primitive cache keyed by address
    returned stale tensors)."""
    run, dims = _traced(module, args, dynamic_shapes)
    memo: dict[tuple, tuple[torch.Tensor, ...]] = {}

    def call(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        key = tuple((x.data_ptr(), tuple(x.shape)) for x in xs)
        if key not in memo:
            memo[key] = tuple(o.clone() for o in _as_tuple(run(*xs)))
        return tuple(o.clone() for o in memo[key])

    return Program(call, dims)


@_declare
def noncontiguous_as_contiguous(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """A runtime that reads each input's data_ptr as a contiguous buffer of its shape
    (impls/export.py's executorch path makes inputs contiguous for this reason;
    pytorch/executorch#18562, #21837): right for contiguous inputs, scrambled for a
    transposed or sliced one."""
    run, dims = _traced(module, args, dynamic_shapes)

    def call(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        flat = [x.as_strided(x.shape, torch.empty(x.shape).stride(), x.storage_offset())
                for x in xs]
        return _as_tuple(run(*flat))

    return Program(call, dims)


@_declare
def float64_single_example(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """A batch-of-one path (the "single request" path of a server) that runs the model in
    float64 and forgets to cast back: right values, float64 outputs, at batch 1 only."""
    run, dims = _traced(module, args, dynamic_shapes)
    dims = [d for d, _ in _named_dims(dynamic_shapes, "batch")]
    double = copy.deepcopy(module).double()

    def call(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if dims and dims[0] is not None and xs[0].shape[dims[0]] == 1:
            with torch.no_grad():
                return _as_tuple(double(*(x.double() if x.is_floating_point() else x
                                          for x in xs)))
        return _as_tuple(run(*xs))

    return Program(call, dims)


@_declare
def aliased_outputs(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Static output buffers per shape (CUDA-graph / AOT runtime style): each call writes
    into and returns the same tensors, so a result kept from an earlier call at that shape
    is overwritten by the next (pytorch/pytorch#104435: "accessing tensor output of
    CUDAGraphs that has been overwritten by a subsequent run")."""
    run, dims = _traced(module, args, dynamic_shapes)
    buffers: dict[tuple, tuple[torch.Tensor, ...]] = {}

    def call(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outs = _as_tuple(run(*xs))
        key = tuple(tuple(x.shape) for x in xs)
        if key not in buffers:
            buffers[key] = tuple(torch.empty_like(o) for o in outs)
        for buf, o in zip(buffers[key], outs, strict=True):
            buf.copy_(o)
        return buffers[key]

    return Program(call, dims)


@_declare
def artefact_reinitialised(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Runs only in this process: the program executes the in-memory export, while the
    ``.pt2`` it reports as its artefact was exported from a freshly constructed copy (weights
    reinitialised: the checkpoint was loaded after the save). Right numbers here, wrong
    numbers for anyone who loads the artefact."""
    run, dims = _traced(module, args, dynamic_shapes)
    fresh = copy.deepcopy(module)
    with torch.random.fork_rng():
        torch.manual_seed(12345)
        for sub in fresh.modules():
            if sub is not fresh and hasattr(sub, "reset_parameters"):
                sub.reset_parameters()
    path: Path | None = _artefact(".pt2")
    try:
        torch.export.save(exported(fresh, args, dynamic_shapes), path)
    except torch._dynamo.exc.UserError:  # nn.RNN with a dynamic "seq": nothing written
        path = None
    return Program(run, dims, path)


class _Stateful(nn.Module):
    """An RNN that keeps its final state and starts the next call from it when the caller
    passes none (and the batch matches)."""

    def __init__(self, rnn: nn.RNNBase) -> None:
        super().__init__()
        self.rnn = rnn
        self.state: Any = None

    def forward(self, x: torch.Tensor, hx: Any = None):
        if hx is None and self.state is not None:
            h = self.state[0] if isinstance(self.state, tuple) else self.state
            b = x.shape[0] if self.rnn.batch_first and x.dim() == 3 else x.shape[-2]
            if x.dim() == 3 and h.shape[1] == b:
                hx = self.state
        out, state = self.rnn(x, hx)
        self.state = state
        return out, state


@_declare
def stateful_across_calls(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """A stateful deployment (OpenVINO's LowLatency2 transformation, Keras
    ``stateful=True``): where the model takes no initial state, the recurrent state read
    at the start of a call is the one the previous call left (openvinotoolkit/openvino#735
    asked for it; it is wrong for independent requests). Right on the first call at each
    batch size, wrong on every later one."""
    module = copy.deepcopy(module)
    for name, sub in list(module.named_modules()):
        if isinstance(sub, nn.RNNBase):
            parent_name, _, attr = name.rpartition(".")
            parent = module.get_submodule(parent_name) if parent_name else module
            setattr(parent, attr, _Stateful(sub))
    return _eager_program(module.eval())


@_declare
def layernorm_eps_changed(module: nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """A converter that writes every LayerNorm with its own default epsilon (1e-12, the
    TF-BERT value) instead of the module's 1e-5: invisible for rows of unit variance,
    wrong for rows whose variance is near or below 1e-5 (huggingface/transformers#532,
    OpenNMT/CTranslate2#951: layer-norm epsilons that differ between frameworks)."""
    module = copy.deepcopy(module)
    for sub in module.modules():
        if isinstance(sub, nn.LayerNorm):
            sub.eps = 1e-12
    return _export_program(module, args, dynamic_shapes)


# What the suite said at 0f79775 (each run alone, float32, CPU, -p no:xdist; the faults
# with -x, so a killed one names its first failing test).
_TEST = "conformance/areas/export/test_export.py::test_roundtrip"
_KILLED = "killed by " + _TEST
TODAY: dict[str, str] = {
    "correct": ("false alarm: " + _TEST + "[correct-float32-rnn_tanh-seq] and "
                "[correct-float32-rnn_relu_bi-seq]: UserError: Constraints violated (seq)! "
                "(torch.export cannot keep seq dynamic through nn.RNN; expected for the "
                "shipped export, reported failed for a twin under another name)"),
    "outside_jit_trace": "passes (correct)",
    "outside_handwritten": "passes (correct)",
    "gates_reordered_in_place": "survives",
    "half_roundtrip_in_place": "survives",
    "gru_bias_merged": _KILLED + "[gru_bias_merged-float32-gru-static]",
    "gru_reset_before_matmul": _KILLED + "[gru_reset_before_matmul-float32-gru-static]",
    "bidir_reverse_unflipped": _KILLED + "[bidir_reverse_unflipped-float32-rnn_relu_bi-static]",
    "states_direction_major": _KILLED + "[states_direction_major-float32-lstm_proj_bi-static]",
    "tf32_matmuls": _KILLED + "[tf32_matmuls-float32-rnn_tanh-static]",
    "chunked_state_reset": _KILLED + "[chunked_state_reset-float32-rnn_tanh-seq]",
    "batch_split_first_states": _KILLED + "[batch_split_first_states-float32-rnn_tanh-batch]",
    "clamps_to_max": "survives",
    "cache_by_structure": "survives",
    "cache_by_data_ptr": "survives",
    "noncontiguous_as_contiguous": "survives",
    "float64_single_example": _KILLED + "[float64_single_example-float32-rnn_tanh-batch]",
    "aliased_outputs": "survives",
    "artefact_reinitialised": "survives",
    "stateful_across_calls": _KILLED + "[stateful_across_calls-float32-rnn_relu_bi-static]",
    "layernorm_eps_changed": _KILLED + "[layernorm_eps_changed-float32-encoder-static]",
}
