"""Functional all_gather_tensor of a complex tensor along dim 1, with backward, as the
first collective of a process (two gloo ranks on this machine's loopback); then the same
call again. torch 2.11-2.15: the first call's backward raises ("... is a view and its
base or another view of its base has been modified inplace"), the second passes (2.12
on; on 2.11 it fails too); any collective before it (a float all_reduce) makes the first
pass.

Exit 0: both calls give the right gradient on both ranks; 1: otherwise.
Found by torch-conformance (TestAllGatherTensor::test_first_collective).
"""

import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc
import torch.multiprocessing as mp


def rank_main(rank: int, store: str, out: "mp.Queue") -> None:
    dist.init_process_group("gloo", store=dist.FileStore(store, 2), rank=rank, world_size=2)
    results = []
    for call in ("first", "second"):
        x = torch.full((2, 3), complex(rank + 1, -rank), dtype=torch.complex64,
                       requires_grad=True)
        try:
            y = fc.wait_tensor(fc.all_gather_tensor(x, 1, dist.group.WORLD))
            (y.real.sum() + 2 * y.imag.sum()).backward()
            # x.grad = dL/dRe + i dL/dIm: 1 + 2i per copy of x, a copy on each rank
            ok = y.shape == (2, 6) and torch.allclose(x.grad, torch.full_like(x, 2 + 4j))
            results.append(f"{call} call: {'ok' if ok else f'wrong gradient {x.grad[0, 0]}'}")
        except Exception as exc:
            results.append(f"{call} call: raised {type(exc).__name__}: "
                           f"{str(exc).splitlines()[0][:120]}")
    out.put((rank, results))
    dist.destroy_process_group()


def main() -> int:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = [ctx.Process(target=rank_main, args=(r, store, out)) for r in range(2)]
        for p in procs:
            p.start()
        got = []
        for _ in procs:
            try:
                got.append(out.get(timeout=60))
            except Exception:
                got.append((-1, ["a rank did not answer in 60 s"]))
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
    bad = 0
    for rank, lines in sorted(got):
        for line in lines:
            print(f"rank {rank}: {line}")
            bad += not line.endswith(": ok")
    print(f"torch {torch.__version__}: {'FAIL' if bad else 'ok'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
