"""The three small models' float64 oracles against the torch modules they mirror, computed in
float64 on CPU, plus closed-form special cases and error paths."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from oracles import export_models as em


def _np_params(mod: nn.Module) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().copy() for k, v in mod.state_dict().items()}


class SeqModel(nn.Module):
    def __init__(self, vocab: int, emb: int, hidden: int, v_out: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, batch_first=True)
        self.head = nn.Linear(hidden, v_out)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.lstm(self.embedding(tokens))[0])


class ConvNet(nn.Module):
    def __init__(self, c1: int, c2: int, v_out: int):
        super().__init__()
        self.conv1 = nn.Conv2d(3, c1, 3, padding=1)
        self.conv2 = nn.Conv2d(c1, c2, 3, padding=1)
        self.head = nn.Linear(c2, v_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        return self.head(torch.relu(self.conv2(y)).mean(dim=(2, 3)))


def _close(got: np.ndarray, want: torch.Tensor) -> None:
    assert got.dtype == np.float64 and got.shape == tuple(want.shape)
    np.testing.assert_allclose(got, want.numpy(), rtol=0, atol=1e-12)


# --- seq_model -----------------------------------------------------------------------------

@pytest.mark.parametrize(("n", "s", "vocab", "emb", "hidden", "v_out"),
                         [(3, 4, 11, 5, 7, 6), (1, 1, 2, 1, 1, 1), (2, 9, 5, 3, 4, 5)])
def test_seq_model_vs_torch(n, s, vocab, emb, hidden, v_out):
    torch.manual_seed(n * 100 + s)
    mod = SeqModel(vocab, emb, hidden, v_out).double().eval()
    tokens = np.random.default_rng(s).integers(0, vocab, (n, s))
    with torch.no_grad():
        want = mod(torch.from_numpy(tokens))
    _close(em.seq_model(tokens, _np_params(mod)), want)


def test_seq_model_errors():
    mod = SeqModel(4, 2, 3, 2).double()
    params = _np_params(mod)
    for bad in ([[0, 4]], [[-1, 0]]):
        with pytest.raises(ValueError, match="tokens must lie"):
            em.seq_model(np.array(bad), params)
    with pytest.raises(ValueError, match="integer"):
        em.seq_model(np.zeros((1, 2)), params)
    with pytest.raises(ValueError, match="head"):
        em.seq_model(np.zeros((1, 2), int), dict(params, **{"head.weight": np.zeros((2, 4))}))
    with pytest.raises(ValueError, match="weight_hh_l0"):
        em.seq_model(np.zeros((1, 2), int),
                     dict(params, **{"lstm.weight_hh_l0": np.zeros((12, 2))}))


# --- encoder_layer -------------------------------------------------------------------------

@pytest.mark.parametrize(("n", "s", "e", "nhead", "ff"),
                         [(2, 5, 8, 2, 16), (1, 3, 8, 4, 8), (3, 1, 6, 1, 12), (2, 7, 12, 3, 5)])
def test_encoder_layer_vs_torch(n, s, e, nhead, ff):
    torch.manual_seed(e * 10 + nhead)
    mod = nn.TransformerEncoderLayer(e, nhead, ff, dropout=0.0, batch_first=True).double()
    mod.eval()
    with torch.no_grad():  # non-zero biases, so their placement is tested
        for name, prm in mod.named_parameters():
            if "bias" in name or "norm" in name:
                prm.add_(torch.randn_like(prm) * 0.5)
    x = np.random.default_rng(s).normal(size=(n, s, e)) * 2.0
    with torch.no_grad():
        want = mod(torch.from_numpy(x))
    _close(em.encoder_layer(x, _np_params(mod), nhead=nhead), want)


def test_encoder_layer_eps():
    torch.manual_seed(1)
    mod = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True,
                                     layer_norm_eps=0.3).double().eval()
    x = np.random.default_rng(1).normal(size=(2, 3, 4)) * 0.1
    with torch.no_grad():
        want = mod(torch.from_numpy(x))
    _close(em.encoder_layer(x, _np_params(mod), nhead=2, eps=0.3), want)


def test_encoder_layer_one_token_attends_to_itself():
    # With S = 1 the softmax is 1, so self-attention is out_proj(v): check by hand.
    rng = np.random.default_rng(0)
    e = 4
    p = {"self_attn.in_proj_weight": rng.normal(size=(3 * e, e)),
         "self_attn.in_proj_bias": rng.normal(size=3 * e),
         "self_attn.out_proj.weight": rng.normal(size=(e, e)),
         "self_attn.out_proj.bias": rng.normal(size=e),
         "linear1.weight": np.zeros((3, e)), "linear1.bias": np.zeros(3),
         "linear2.weight": np.zeros((e, 3)), "linear2.bias": np.zeros(e),
         "norm1.weight": np.ones(e), "norm1.bias": np.zeros(e),
         "norm2.weight": np.ones(e), "norm2.bias": np.zeros(e)}
    x = rng.normal(size=(1, 1, e))
    v = x[0, 0] @ p["self_attn.in_proj_weight"][2 * e:].T + p["self_attn.in_proj_bias"][2 * e:]
    y = x[0, 0] + v @ p["self_attn.out_proj.weight"].T + p["self_attn.out_proj.bias"]
    for _ in range(2):  # norm1, then norm2 of (y + 0)
        y = (y - y.mean()) / np.sqrt(y.var() + 1e-5)
    np.testing.assert_allclose(em.encoder_layer(x, p, nhead=2)[0, 0], y, rtol=0, atol=1e-13)


def test_encoder_layer_errors():
    mod = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True).double()
    params = _np_params(mod)
    x = np.zeros((1, 2, 4))
    with pytest.raises(ValueError, match="divisible"):
        em.encoder_layer(x, params, nhead=3)
    with pytest.raises(ValueError, match="in_proj"):
        em.encoder_layer(x, dict(params, **{"self_attn.in_proj_weight": np.zeros((12, 3))}),
                         nhead=2)
    with pytest.raises(ValueError, match="missing"):
        em.encoder_layer(x, {k: v for k, v in params.items() if k != "norm2.bias"}, nhead=2)
    with pytest.raises(ValueError, match=r"\(N, S, E\)"):
        em.encoder_layer(np.zeros((2, 4)), params, nhead=2)


# --- convnet -------------------------------------------------------------------------------

@pytest.mark.parametrize(("n", "h", "w", "c1", "c2", "v_out"),
                         [(2, 8, 8, 4, 5, 3), (1, 7, 9, 3, 2, 4), (3, 2, 3, 2, 3, 1),
                          (1, 5, 5, 1, 1, 2)])
def test_convnet_vs_torch(n, h, w, c1, c2, v_out):
    torch.manual_seed(h * w)
    mod = ConvNet(c1, c2, v_out).double().eval()
    x = np.random.default_rng(h + w).normal(size=(n, 3, h, w))
    with torch.no_grad():
        want = mod(torch.from_numpy(x))
    _close(em.convnet(x, _np_params(mod)), want)


def test_conv_is_cross_correlation():
    # A single 1 at the kernel's top-left corner reads the input's top-left neighbour:
    # out[i, j] = x[i-1, j-1] (zero-padded), which a flipped (true) convolution would not give.
    x = np.arange(12.0).reshape(1, 1, 3, 4)
    k = np.zeros((1, 1, 3, 3))
    k[0, 0, 0, 0] = 1.0
    got = em._conv2d(x, k, np.zeros(1), 1)[0, 0]
    want = np.zeros((3, 4))
    want[1:, 1:] = x[0, 0, :-1, :-1]
    np.testing.assert_array_equal(got, want)


def test_convnet_errors():
    params = _np_params(ConvNet(2, 2, 2).double())
    with pytest.raises(ValueError, match=r"\(N, 3, H, W\)"):
        em.convnet(np.zeros((1, 4, 4, 4)), params)
    with pytest.raises(ValueError, match=">= 2"):
        em.convnet(np.zeros((1, 3, 1, 4)), params)
    with pytest.raises(ValueError, match="conv2"):
        em.convnet(np.zeros((1, 3, 4, 4)), dict(params, **{"conv2.weight": np.zeros((2, 3, 3, 3))}))
