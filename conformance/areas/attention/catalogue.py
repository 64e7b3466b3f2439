"""The attention case catalogue: masks and score modifications as FlexAttention callables.

Each entry builds a torch callable for a given device from parameters drawn once (numpy), so
the implementation under test (on its device) and the oracle (float64 on the CPU) evaluate
the same function. Callables carry ``conformance_kind`` (the entry's name) so that adapters
with fast paths (SDPA's ``is_causal``, additive biases) can recognise them; every entry is
also a plain mask_mod / score_mod that FlexAttention-style implementations take as is.

Alignment when Sq != Sk is stated per mask: "causal_tl" aligns the first query with the
first key (q >= kv); "causal_br" and the masks built on it align the last query with the
last key (q + Sk - Sq >= kv), as FlashAttention does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

Mod = Callable[..., Any]


@dataclass(frozen=True)
class Geometry:
    batch: int
    heads: int  # query heads
    sq: int
    sk: int

    @property
    def offset(self) -> int:
        """Bottom-right alignment shift: query i sits at key position i + Sk - Sq."""
        return self.sk - self.sq


@dataclass(frozen=True)
class Entry:
    name: str
    kind: str  # masks: "mask"; score mods: "additive" or "general"
    draw: Callable[[np.random.Generator, Geometry], dict[str, Any]]
    build: Callable[[dict[str, Any], Geometry, torch.device], Mod]
    applies: Callable[[Geometry], bool] = lambda g: True

    def make(self, params: dict[str, Any], geo: Geometry, device: torch.device | str) -> Mod:
        fn = self.build(params, geo, torch.device(device))
        fn.conformance_kind = self.name
        fn.conformance_additive = self.kind == "additive"
        fn.conformance_params = params
        return fn


def _t(x: np.ndarray, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    return torch.as_tensor(np.ascontiguousarray(x), dtype=dtype).to(device)


# ----------------------------------------------------------------------------- masks
def _causal_tl(p, g, dev):
    def mask(b, h, q, kv):
        return q >= kv
    return mask


def _causal_br(p, g, dev):
    off = g.offset

    def mask(b, h, q, kv):
        return q + off >= kv
    return mask


def _window(p, g, dev):
    off, w = g.offset, p["window"]

    def mask(b, h, q, kv):
        return (q + off >= kv) & (q + off - kv < w)
    return mask


def _prefix_lm(p, g, dev):
    off, prefix = g.offset, p["prefix"]

    def mask(b, h, q, kv):
        return (kv < prefix) | (q + off >= kv)
    return mask


def _doc_ids(rng: np.random.Generator, length: int, docs: int) -> np.ndarray:
    cuts = np.sort(rng.choice(np.arange(1, length), size=min(docs - 1, length - 1),
                              replace=False)) if length > 1 else np.array([], int)
    return np.repeat(np.arange(len(cuts) + 1), np.diff(np.r_[0, cuts, length]))


def _document_draw(rng, g):
    docs = int(rng.integers(2, 5))
    return {"doc_q": _doc_ids(rng, g.sq, docs), "doc_kv": _doc_ids(rng, g.sk, docs)}


def _document(p, g, dev):
    doc_q, doc_kv = _t(p["doc_q"], dev, torch.int64), _t(p["doc_kv"], dev, torch.int64)

    def mask(b, h, q, kv):
        return doc_q[q] == doc_kv[kv]
    return mask


def _block_sparse_draw(rng, g):
    coarse = rng.random((g.heads, -(-g.sq // 128), -(-g.sk // 128))) < 0.7
    fine = rng.random((-(-g.sq // 16), -(-g.sk // 16))) < 0.6
    dead = rng.choice(g.sq, size=min(2, g.sq), replace=False)
    return {"coarse": coarse, "fine": fine, "dead_rows": dead}


def _block_sparse(p, g, dev):
    coarse, fine = _t(p["coarse"], dev, torch.bool), _t(p["fine"], dev, torch.bool)
    dead = _t(p["dead_rows"], dev, torch.int64)

    def mask(b, h, q, kv):
        alive = (q != dead[0]) & (q != dead[-1])
        return coarse[h, q // 128, kv // 128] & fine[q // 16, kv // 16] & alive
    return mask


MASKS: dict[str, Entry] = {e.name: e for e in [
    Entry("causal_tl", "mask", lambda r, g: {}, _causal_tl),
    Entry("causal_br", "mask", lambda r, g: {}, _causal_br),
    Entry("sliding_window", "mask", lambda r, g: {"window": int(r.integers(1, 65))}, _window),
    Entry("prefix_lm", "mask", lambda r, g: {"prefix": int(r.integers(0, g.sk + 1))}, _prefix_lm),
    Entry("document", "mask", _document_draw, _document, lambda g: g.sq > 1 and g.sk > 1),
    Entry("block_sparse", "mask", _block_sparse_draw, _block_sparse),
]}


# ------------------------------------------------------------------------ score mods
def _alibi_draw(rng, g):
    return {"slopes": 2.0 ** (-8.0 * (np.arange(g.heads) + 1) / g.heads)}


def _alibi(p, g, dev):
    slopes, off = _t(p["slopes"], dev, torch.float32), g.offset

    def score_mod(score, b, h, q, kv):
        return score + slopes[h] * (kv - q - off)
    return score_mod


def _softcap(p, g, dev):
    cap = p["cap"]

    def score_mod(score, b, h, q, kv):
        return cap * torch.tanh(score / cap)
    return score_mod


def _rel_bias_draw(rng, g):
    return {"table": rng.normal(0, 1, g.sq + g.sk)}


def _rel_bias(p, g, dev):
    table, shift = _t(p["table"], dev, torch.float32), g.sq - 1

    def score_mod(score, b, h, q, kv):
        return score + table[kv - q + shift]
    return score_mod


def _bias_lookup_draw(rng, g):
    return {"bias": rng.normal(0, 1, (g.batch, g.heads, g.sq, g.sk))}


def _bias_lookup(p, g, dev):
    bias = _t(p["bias"], dev, torch.float32)

    def score_mod(score, b, h, q, kv):
        return score + bias[b, h, q, kv]
    return score_mod


def _head_scale_draw(rng, g):
    return {"scales": rng.uniform(0.25, 2.0, g.heads)}


def _head_scale(p, g, dev):
    scales = _t(p["scales"], dev, torch.float32)

    def score_mod(score, b, h, q, kv):
        return score * scales[h]
    return score_mod


SCORE_MODS: dict[str, Entry] = {e.name: e for e in [
    Entry("alibi", "additive", _alibi_draw, _alibi),
    Entry("softcap", "general", lambda r, g: {"cap": float(r.choice([5.0, 20.0, 50.0]))},
          _softcap),
    Entry("rel_bias", "additive", _rel_bias_draw, _rel_bias),
    Entry("bias_lookup", "additive", _bias_lookup_draw, _bias_lookup),
    Entry("head_scale", "general", _head_scale_draw, _head_scale),
]}
