"""Our Triton flash-attention kernels (forward, backward) with FlexAttention-style mods.

Modules: mods (score_mod/mask_mod catalogue as Triton functions), fwd (forward kernel),
bwd (backward kernels), blocks (block-sparsity tables), guards (CPU bounds checking).
The adapter with the suite's contract is impls/attention/triton_fa.py.
"""
