"""The attention benchmark's gate (benchmarks/attention_gpu.py,
conformance/areas/attention/gate.py): every result is checked at its size against the
float64 oracle on the first and the last (batch, head) slice, and a ratio is given only
where both results passed. On the CPU at S = 128."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import torch

from tests.planted.attention_faults import correct_dense

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("attention_gpu",
                                                  ROOT / "benchmarks" / "attention_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def last_head_off(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                  return_lse=False):
    """Right but for the last (batch, head): a stride slip that the first slice hides."""
    out = correct_dense(q, k, v, score_mod, block_mask, scale, enable_gqa, False)
    bump = torch.zeros_like(out)
    bump[-1, -1] = 0.5
    return out + bump


def test_a_wrong_result_gets_no_ratio(tmp_path, monkeypatch):
    bench = _bench()
    for name, target in (("planted.correct", "tests.planted.attention_faults:correct_dense"),
                         ("planted.wrong_scale", "tests.planted.attention_faults:wrong_scale"),
                         ("planted.last_head", "tests.test_attention_benchmark:last_head_off")):
        monkeypatch.setitem(bench.IMPLS, name, (target, "causal_br"))
    out = tmp_path / "b.json"
    bench.main(["--device", "cpu", "--seqlens", "128", "--head-dims", "64", "--iters", "10",
                "--impls", "sdpa.math,planted.correct,planted.wrong_scale,planted.last_head",
                "--out", str(out)])
    rows = json.loads(out.read_text())["results"]
    got = {(r["impl"], r["causal"]): r for r in rows}
    for causal in (False, True):
        math_row, good = got[("sdpa.math", causal)], got[("planted.correct", causal)]
        assert math_row["fwd_check"] == "pass" and math_row["bwd_check"] == "pass"
        assert good["fwd_check"] == "pass" and good["bwd_check"] == "pass"
        assert bench.gated_ratio(good, math_row, "fwd") is not None
        wrong = got[("planted.wrong_scale", causal)]
        assert wrong["fwd_check"].startswith("fail: out at (b, h) = (0, 0)")
        assert wrong["fwd_tflops"] > 0 and bench.gated_ratio(wrong, math_row, "fwd") is None
        last = got[("planted.last_head", causal)]
        assert last["fwd_check"].startswith("fail: out at (b, h) = (1, 15)"), last["fwd_check"]
        assert bench.gated_ratio(math_row, last, "fwd") is None  # either side failing
        assert last["bwd_check"] == "pass"  # the bump is a constant: no gradient
