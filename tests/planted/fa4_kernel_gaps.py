"""Correct twins of the FA4 numerics model with the sm90 kernels' known differences from it
(impls/attention/fa4/model.py): per-lane row sums of P, exp2 without flush-to-zero, and
softcap's tanh.approx.f32 off by up to its maximum relative error, + and - alternating by
element or the same sign everywhere. A kernel with these differences is correct: the
checks must pass it. ``tanh_8x`` is eight times that error: the float16 softcap checks
must catch it (the bound is not so loose that tanh's error is invisible)."""

from __future__ import annotations

from impls.attention.fa4.model import fa4_model_sm90

TANH_APPROX = 2.0**-10.9  # PTX ISA: tanh.approx.f32's maximum relative error 2**-10.987
KERNEL = {"row_sum": "lanes", "exp2_ftz": False}

alternating = fa4_model_sm90.with_config("fa4_kernel_gaps.alternating", **KERNEL,
                                         tanh_rel_error=TANH_APPROX)
plus = fa4_model_sm90.with_config("fa4_kernel_gaps.plus", **KERNEL,
                                  tanh_rel_error=TANH_APPROX, tanh_error_signs="constant")
minus = fa4_model_sm90.with_config("fa4_kernel_gaps.minus", **KERNEL,
                                   tanh_rel_error=-TANH_APPROX, tanh_error_signs="constant")
tanh_8x = fa4_model_sm90.with_config("fa4_kernel_gaps.tanh_8x", **KERNEL,
                                     tanh_rel_error=8 * TANH_APPROX,
                                     tanh_error_signs="constant")
