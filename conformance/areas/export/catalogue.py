"""The export area's model catalogue: each model as a module with flat tensor inputs and
outputs, seeded weights, inputs at any (batch, seq) size, its float64 oracle and its
same-precision baseline.

Weights come from torch's default initialisation under ``torch.manual_seed`` (in a forked
RNG state), cast to the case's dtype; the oracle sees exactly those values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from conformance.areas.export import baseline
from conformance.harness.tensors import exact_numpy, from_numpy, rounded
from oracles import export_models, recurrent

EXAMPLE = (3, 4)  # (batch, seq) the programs are exported at
BATCHES = (1, 2, 7, 64)
SEQS = (1, 5, 33, 257)
MAX_BATCH, MAX_SEQ = max(BATCHES), max(SEQS)
FEATURES, HIDDEN, VOCAB, SIDE = 4, 6, 20, 8


class _X(nn.Module):
    """An RNN or GRU on ``x`` alone: (output, h_n).

    The wrappers are split per kind with fixed return types so that ``torch.jit.script``
    compiles them (TorchScript takes neither ``tuple[Tensor, ...]`` nor a starred return)."""

    def __init__(self, core: nn.Module) -> None:
        super().__init__()
        self.rnn = core

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, h = self.rnn(x)
        return out, h


class _XC(_X):
    """An LSTM on ``x`` alone: (output, h_n, c_n)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out, (h, c) = self.rnn(x)
        return out, h, c


class _XH(_X):
    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, h = self.rnn(x, h0)
        return out, h


class _XHC(_X):
    def forward(self, x: torch.Tensor, h0: torch.Tensor,
                c0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out, (h, c) = self.rnn(x, (h0, c0))
        return out, h, c


class SeqModel(nn.Module):
    """Embedding -> LSTM -> linear head (a token classifier)."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, 8)
        self.lstm = nn.LSTM(8, HIDDEN, batch_first=True)
        self.head = nn.Linear(HIDDEN, 5)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor]:
        return (self.head(self.lstm(self.embedding(tokens))[0]),)


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        return (self.layer(x),)


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 6, 3, padding=1)
        self.head = nn.Linear(6, 5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        y = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        return (self.head(torch.relu(self.conv2(y)).mean(dim=(2, 3))),)


@dataclass(frozen=True)
class Model:
    name: str
    kind: str  # RNN | LSTM | GRU | seq_model | encoder | convnet
    options: dict[str, Any] = field(default_factory=dict)  # the recurrent module's kwargs
    states: bool = False  # initial states are inputs
    ci_heavy: bool = False  # in the ci profile's subset for the slow paths (aoti, executorch)

    @property
    def recurrent(self) -> bool:
        return self.kind in ("RNN", "LSTM", "GRU")

    @property
    def inputs(self) -> tuple[str, ...]:
        if self.kind == "seq_model":
            return ("tokens",)
        if not self.states:
            return ("x",)
        return ("x", "h0", "c0") if self.kind == "LSTM" else ("x", "h0")

    @property
    def outputs(self) -> tuple[str, ...]:
        if not self.recurrent:
            return ("output",)
        return ("output", "h_n", "c_n") if self.kind == "LSTM" else ("output", "h_n")

    @property
    def has_seq(self) -> bool:
        return self.kind != "convnet"

    def dims(self, which: str) -> dict[str, int]:
        """Per input name, the index of its batch ("batch") or sequence ("seq") dim."""
        bf = self.options.get("batch_first", False) or not self.recurrent
        if which == "seq":
            return {self.inputs[0]: 1 if bf else 0} if self.has_seq else {}
        return {name: (0 if bf else 1) if name in ("x", "tokens") else 1
                for name in self.inputs}

    def state_shapes(self, batch: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        o = self.options
        layers = o.get("num_layers", 1) * (2 if o.get("bidirectional") else 1)
        hidden = o.get("hidden_size", HIDDEN)
        return (layers, batch, o.get("proj_size", 0) or hidden), (layers, batch, hidden)


def _rec(name: str, kind: str, states: bool, ci: bool = False, **options: Any) -> Model:
    return Model(name, kind, {"input_size": FEATURES, "hidden_size": HIDDEN, **options},
                 states, ci)


MODELS = {m.name: m for m in [
    _rec("rnn_tanh", "RNN", True, True, num_layers=2, batch_first=True),
    _rec("rnn_relu_bi", "RNN", False, nonlinearity="relu", bidirectional=True),
    _rec("lstm", "LSTM", True, True, batch_first=True),
    _rec("lstm_proj_bi", "LSTM", True, num_layers=2, bidirectional=True, proj_size=3,
         hidden_size=8),
    _rec("gru", "GRU", True, num_layers=2, batch_first=True),
    _rec("gru_bi", "GRU", True, True, bidirectional=True),
    Model("seq_model", "seq_model"),
    Model("encoder", "encoder"),
    Model("convnet", "convnet"),
]}


def build(model: Model, dtype: torch.dtype, seed: int = 0) -> nn.Module:
    """The model in eval mode with seeded weights in ``dtype`` (on the CPU)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if model.recurrent:
            core = getattr(nn, model.kind)(**model.options)
            lstm = model.kind == "LSTM"
            wrap = (_XHC if lstm else _XH) if model.states else (_XC if lstm else _X)
            module: nn.Module = wrap(core)
        else:
            module = {"seq_model": SeqModel, "encoder": Encoder, "convnet": ConvNet}[model.kind]()
    return module.to(dtype).eval()


def make_inputs(model: Model, batch: int, seq: int, dtype: str, seed: int = 0
                ) -> list[np.ndarray]:
    """Inputs at (batch, seq) as float64 arrays already rounded to ``dtype`` (int64 tokens)."""
    rng = np.random.default_rng([seed, batch, seq, len(model.name)])
    if model.kind == "seq_model":
        return [rng.integers(0, VOCAB, (batch, seq), dtype=np.int64)]
    if model.kind == "convnet":
        x = rng.standard_normal((batch, 3, SIDE, SIDE))
    else:
        width = 8 if model.kind == "encoder" else FEATURES
        bf = model.options.get("batch_first", False) or not model.recurrent
        x = rng.standard_normal((batch, seq, width) if bf else (seq, batch, width))
    arrays = [x]
    if model.states:
        h_shape, c_shape = model.state_shapes(batch)
        arrays.append(rng.standard_normal(h_shape))
        if model.kind == "LSTM":
            arrays.append(rng.standard_normal(c_shape))
    return [rounded(a, dtype) for a in arrays]


def to_tensors(arrays: list[np.ndarray], dtype: torch.dtype, device: Any) -> list[torch.Tensor]:
    return [torch.from_numpy(a).to(device) if a.dtype == np.int64 else from_numpy(a, dtype, device)
            for a in arrays]


def params(module: nn.Module, prefix: str = "") -> dict[str, np.ndarray]:
    """The module's parameters as float64 arrays (keys without ``prefix``)."""
    return {k.removeprefix(prefix): exact_numpy(v) for k, v in module.state_dict().items()
            if k.startswith(prefix)}


def oracle(model: Model, module: nn.Module, inputs: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    """The float64 outputs (oracles/recurrent.py, oracles/export_models.py)."""
    if model.recurrent:
        o = {k: v for k, v in model.options.items() if k not in ("input_size", "hidden_size")}
        h0 = inputs[1] if len(inputs) > 1 else None
        c0 = inputs[2] if len(inputs) > 2 else None
        return tuple(recurrent.rnn(model.kind, inputs[0], params(module, "rnn."), h0=h0, c0=c0,
                                   **o))
    fn: Callable[..., np.ndarray] = {
        "seq_model": export_models.seq_model, "convnet": export_models.convnet,
        "encoder": lambda x, p: export_models.encoder_layer(x, p, nhead=2)}[model.kind]
    prefix = "layer." if model.kind == "encoder" else ""
    return (fn(inputs[0], params(module, prefix)),)


def same_precision(model: Model, module: nn.Module, inputs: list[np.ndarray],
                   dtype: torch.dtype, tf32: bool = False) -> list[tuple[np.ndarray, ...]]:
    """The plain same-precision computations (baseline.py) on the CPU, as float64 arrays:
    one per evaluation form the model admits (two for a GRU); ``tf32``: every matrix
    product's operands rounded to TF32 first."""
    args = to_tensors(inputs, dtype, "cpu")
    forms = baseline.FORMS if model.kind == "GRU" else baseline.FORMS[:1]
    with torch.no_grad(), baseline.operands(baseline.tf32 if tf32 else None):
        outs = [baseline.run(model, module, args, form) for form in forms]
    return [tuple(exact_numpy(t) for t in out) for out in outs]
