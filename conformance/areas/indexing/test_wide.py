"""64-bit indexing (thorough profile): an operand of 2^31 + 11 elements, so that a kernel
with 32-bit offsets reads the wrong element or misses the bounds check. Valid indices past
2^31 must read the right values; n, 2^32 + 1 (1 once truncated to 32 bits) and -n-1 must
raise. One isolated child per case (4 GiB of float16; skipped where memory is short)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from conformance.areas.indexing.checks import sync
from conformance.areas.indexing.ops import SPECS
from conformance.areas.indexing.verdicts import ALLOWED
from conformance.harness.compare import exact

WIDE = 2**31 + 11
MARKS = {WIDE - 1: 5.0, 2**31 + 3: 7.0, 1: 3.0}  # element -> value (every other one is 0)
BAD = (WIDE, 2**32 + 1, -WIDE - 1)
DTYPE = torch.float16  # the narrowest dtype every one of these areas takes
OPS = ("index_select", "gather", "take", "embedding")


def _tensors(op: str, x: torch.Tensor, index: torch.Tensor) -> dict[str, torch.Tensor]:
    if op == "embedding":
        return {"index": index, "weight": x.view(-1, 1)}
    return {"x": x, "index": index}


def wide_case(op: str, impl_spec: str, device: str) -> dict[str, Any]:
    """Run the valid and the invalid wide cases of ``op`` (module-level: for the child)."""
    from conformance.harness.registry import load_object

    fn = load_object(impl_spec, f"--impl indexing.{op}")
    spec = SPECS[op]
    x = torch.zeros(WIDE, dtype=DTYPE, device=device)
    for at, value in MARKS.items():
        x[at] = value
    scalars = {"dim": 0, "max_norm": None}
    index = torch.tensor(list(MARKS), dtype=torch.int64, device=device)
    got = spec.call(fn, _tensors(op, x, index), scalars)
    sync(device)
    out: dict[str, Any] = {"valid": [float(v) for v in got.reshape(-1).cpu().tolist()],
                           "invalid": {}}
    for bad in BAD:
        try:
            res = spec.call(fn, _tensors(op, x, torch.tensor([0, bad], device=device)),
                            scalars)
            sync(device)
            if isinstance(res, torch.Tensor):
                res.cpu()
            out["invalid"][str(bad)] = {"raised": None}
        except Exception as exc:
            mro = [f"{c.__module__}.{c.__qualname__}" for c in type(exc).__mro__]
            out["invalid"][str(bad)] = {"raised": mro, "message": str(exc)[:300]}
    return out


NEED = WIDE * 2 + 2**30  # bytes: the float16 operand and 1 GiB to spare


def _room(device: torch.device) -> bool:
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0] > NEED
    try:  # MemAvailable: free memory and what the page cache would give back
        with open("/proc/meminfo") as f:
            info = {ln.split(":")[0]: int(ln.split()[1]) * 1024 for ln in f if ":" in ln}
        return info.get("MemAvailable", 0) > 2 * NEED
    except OSError:
        return False


class WideTests:
    op: str

    def test_64bit(self, impl, dtype, device, record, isolated):
        if dtype != DTYPE:
            pytest.skip(f"[unsupported] the wide case runs in {DTYPE} only (memory)")
        if not _room(device):
            pytest.skip(f"[skipped] needs about {2 * NEED / 2**30:.0f} GiB free on {device}")
        outcome = isolated(wide_case, self.op, impl.spec, str(device), timeout=300)
        record.case(op=self.op, n=WIDE)
        record.require(exact("the case ran to its end", int(outcome.kind != "returned"), 1,
                             isolated.explain(outcome) if outcome.kind != "returned" else ""))
        res = outcome.value
        want = [*MARKS.values()]
        record.require(exact("valid indices past 2^31 read the right elements",
                             int(res["valid"] != want), 1,
                             f"got {res['valid']}, expected {want} (indices {list(MARKS)})"))
        for bad, what in res["invalid"].items():
            ok = what["raised"] is not None and any(c in what["raised"] for c in ALLOWED)
            record.require(exact(f"index {bad} raises", int(not ok), 1,
                                 f"index {bad} on {WIDE} elements: " + (
                                     "no error" if what["raised"] is None else
                                     f"raised {what['raised'][0]}: {what['message']}")))


for _op in OPS:
    _name = "TestWide" + "".join(w.title() for w in _op.split("_"))
    globals()[_name] = type(_name, (WideTests,), {
        "op": _op, "pytestmark": pytest.mark.area(f"indexing.{_op}"), "__module__": __name__})
