"""Functional all_reduce_coalesced with MAX of one empty bfloat16 tensor, then its
backward, 20 times on three gloo ranks (this machine's loopback, a FileStore), then one
all_reduce with data. torch 2.15.0: the MAX backward (new in 2.15) raises autograd's
in-place error ("... is at version 2; expected version 1") on some ranks and not on
others, differently each call; a rank that does not raise goes on to the backward's
tie-count collective, so the ranks' collective counts drift apart and the all_reduce with
data that follows hangs on every rank. torch 2.14.1: every rank raises "all_reduce_coalesced
backward only supports `sum` ..." on every call, alike, and the all_reduce returns.

Exit 0: every rank ended every call alike and the last all_reduce returned; 1: otherwise.
Found by torch-conformance (diagnosing a hang of the next case, issue 64;
test_regressions.py::test_empty_extremum_backward_in_step).
"""

import datetime
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc
import torch.multiprocessing as mp

WORLD, CALLS = 3, 20


def rank_main(rank: int, store: str, out: "mp.Queue") -> None:
    dist.init_process_group("gloo", store=dist.FileStore(store, WORLD), rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=15))
    group = dist.group.WORLD
    ends = []
    for _ in range(CALLS):
        x = torch.zeros(0, 1, dtype=torch.bfloat16, requires_grad=True)
        (y,) = fc.all_reduce_coalesced([x], "max", group)
        y = fc.wait_tensor(y)
        try:
            torch.autograd.grad([y], [x], [torch.ones_like(y)])
            ends.append("ok")
        except RuntimeError as exc:
            ends.append("raised: " + str(exc).splitlines()[0][:60])
    counts = group._get_sequence_number_for_group()
    out.put((rank, ends, counts, None))
    try:  # the next collective with data: hangs (15 s timeout) when the ranks drifted
        z = torch.ones(4)
        dist.all_reduce(z, group=group)
        after = "all_reduce returned" if bool((z == WORLD).all()) else f"wrong sum {z}"
    except Exception as exc:
        after = f"all_reduce raised {type(exc).__name__}"
    out.put((rank, None, None, after))


def main() -> int:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    ends, counts, after = {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = [ctx.Process(target=rank_main, args=(r, store, out)) for r in range(WORLD)]
        for p in procs:
            p.start()
        for _ in range(2 * WORLD):
            try:
                rank, e, c, a = out.get(timeout=90)
            except Exception:
                break
            if a is None:
                ends[rank], counts[rank] = e, c
            else:
                after[rank] = a
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
    differ = [i for i in range(CALLS) if len({ends[r][i] for r in ends}) > 1]
    for rank in sorted(ends):
        print(f"rank {rank}: {ends[rank].count('ok')} of {CALLS} calls without error, "
              f"collectives issued {counts[rank]}, then: {after.get(rank, 'no answer')}")
    if differ:
        i = differ[0]
        print(f"call {i}: " + "; ".join(f"rank {r}: {ends[r][i]}" for r in sorted(ends)))
    ok = (len(ends) == WORLD and not differ
          and all(after.get(r) == "all_reduce returned" for r in range(WORLD)))
    print(f"torch {torch.__version__}: "
          f"{'ok' if ok else f'FAIL ({len(differ)} of {CALLS} calls differ between ranks)'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
