"""Blind collective faults (``--impl collectives.<op>=tests.planted.blind_collectives:<attr>``).

Written WITHOUT reading how the suite checks collectives: only from the contract in
``impls/collectives.py`` (the semantics of ``torch.distributed._functional_collectives``,
``group`` last and possibly a subgroup of non-adjacent global ranks, ``src`` a rank WITHIN
the group, gradients of sum / avg / min / max), torch's sources (``distributed_c10d.py``:
the c10d ``src`` is a GLOBAL rank; ``nn/functional.py``'s ``_Broadcast``;
``_functional_collectives.py``'s backward formulas) and upstream reports.

Each fault is a small autograd Function over c10d calls that a real engineer could ship: it
is the correct collective (the helpers of ``tests.planted.blind_collectives_correct``:
contiguous copies, half sums in float32, min / max gradients to the extremum's holder)
everywhere outside its trigger, and wrong -- or hung -- inside it. The triggers:

- rank spaces: a group rank used as a global one or the reverse (visible only on a subgroup
  whose group ranks differ from its global ranks, e.g. ranks {1, 3} of 4);
- sizes: a chunked transfer's last chunk (numel > 2**16, odd), a 4 MiB staging buffer
  (per-rank numel > 2**20 float32 elements);
- a zero cotangent on some (not all) ranks; a zero split in an uneven all_to_all;
- dtypes: bfloat16 sent as float16 (range), float16 sent as bfloat16 (mantissa), float32
  buckets compressed to bfloat16;
- layouts: a non-contiguous input read from its storage; coalesced lists (several tensors,
  different scatter dims);
- state: a plan cache keyed by shape and dtype, reused on a group of another size.

Sources (cited in the docstrings): pytorch#130515 (``nn.functional._Broadcast`` compares a
group rank with the global ``src``: zero gradients on subgroups), pytorch#79264 / PR #118593
/ torchrec#4601 (c10d ``src`` / ``dst`` are global ranks, callers pass group ranks),
flash-attention#1244 (an all_reduce whose backward communicates nothing), NVIDIA/nccl#1950
(last elements of the buffer not reduced), jax-ml/jax#40830 (reduce-scatter wrong at the
tail of large chunks), facebookresearch/optimizers#149 and vllm#43547 (ranks without
gradients skip a collective: hangs), pytorch#101380 and facebookresearch/param#25 (zero
split sizes in all_to_all), pytorch#120386 / PR #120582 (nn.functional all_gather mishandling
a non-contiguous buffer), pytorch#65403 (coalesced all_gather implemented by flattening),
ColossalAI#5515 and tenstorrent/tt-metal#48668 (cache keys missing a parameter), torch's
DDP communication hooks documentation (``fp16_compress_hook`` / ``bf16_compress_hook``) and
DeepEP#176 / Megatron-LM#502 (reductions in bfloat16).

``FAULTS`` lists the attributes.
"""

from __future__ import annotations

from .blind_collectives_layout import (
    all_gather_coalesced_flat_layout,
    all_gather_storage_view,
    all_reduce_bf16_via_fp16,
    all_reduce_coalesced_bf16_bucket,
    all_reduce_plan_cache,
    all_to_all_zero_split_pad,
    reduce_scatter_coalesced_first_dim,
    reduce_scatter_fp16_via_bf16,
)
from .blind_collectives_ranks import (
    all_gather_grad_global_slice,
    all_gather_staging_4mib,
    all_reduce_chunked_odd_tail,
    all_reduce_identity_backward,
    all_reduce_minmax_owner_global,
    all_reduce_skip_zero_cotangent,
    broadcast_grad_global_rank,
    broadcast_src_as_global,
    reduce_scatter_global_chunk,
    reduce_scatter_minmax_grad_everyone,
)

FAULTS = tuple(f.__name__ for f in (
    broadcast_src_as_global,
    broadcast_grad_global_rank,
    reduce_scatter_global_chunk,
    all_gather_grad_global_slice,
    all_reduce_minmax_owner_global,
    all_reduce_chunked_odd_tail,
    all_gather_staging_4mib,
    all_reduce_skip_zero_cotangent,
    all_reduce_identity_backward,
    reduce_scatter_minmax_grad_everyone,
    all_to_all_zero_split_pad,
    all_gather_storage_view,
    all_gather_coalesced_flat_layout,
    reduce_scatter_coalesced_first_dim,
    all_reduce_bf16_via_fp16,
    reduce_scatter_fp16_via_bf16,
    all_reduce_coalesced_bf16_bucket,
    all_reduce_plan_cache,
))
