"""Faults planted in the FA4 numerics model (impls/attention/fa4/model.py), each a config
a kernel could get wrong; each must be flagged by the attention suite."""

from __future__ import annotations

from impls.attention.fa4.model import fa4_model_sm100 as _model
from impls.attention.fa4.spec import EXP2_POLY

# a skipped rescale still moves the running max: O and l keep the old scale
rescale_skip_uncorrected = _model.with_config("planted.fa4_rescale_skip_uncorrected",
                                              stale_max=False)
# the max's growth measured in natural-log units against the log2 threshold (8 / ln 2)
threshold_in_ln = _model.with_config("planted.fa4_threshold_in_ln", threshold_units="ln")
# a digit slip in the quadratic coefficient of the software exp2 (0.2263... -> 0.2363...)
poly_wrong_coefficient = _model.with_config(
    "planted.fa4_poly_wrong_coefficient",
    poly=(EXP2_POLY[0], EXP2_POLY[1], EXP2_POLY[2] + 0.01, EXP2_POLY[3]))
# P fed to P V in fp32, not rounded to the input dtype
p_not_rounded = _model.with_config("planted.fa4_p_not_rounded", round_p=False)

# Backward (the sm100 kernel's: 128 x 128 tiles, dS from the rounded P; spec.BWD)
# dS computed from the fp32 P where the sm100 kernel keeps only the rounded P_r
ds_from_unrounded_p = _model.with_config("planted.fa4_ds_from_unrounded_p",
                                         ds_from_rounded_p=False)
# dQ's epilogue misses the softmax scale (dK's has it)
dq_missing_scale = _model.with_config("planted.fa4_dq_missing_scale", dq_scale=False)
# dK and dV of a GQA group taken from its first query head instead of the group's sum
gqa_reduce_one_head = _model.with_config("planted.fa4_gqa_reduce_one_head", gqa_reduce="first")
# the softcap derivative with the wrong sign: t*t - 1 instead of 1 - t*t
softcap_grad_wrong_sign = _model.with_config("planted.fa4_softcap_grad_wrong_sign",
                                             softcap_grad_sign=-1.0)

# control: the spec's configuration under another name
correct = _model.with_config("planted.fa4_correct")

# torch-conformance selftest (conformance/cli/selftest.py): each fault within the scope that
# flags it (tests/test_fa4_model.py runs the same), the control over all of them
_SCOPES = {
    "rescale_skip_uncorrected": "test_forward_catalogue and float16",
    "threshold_in_ln": "rescale_threshold",
    "poly_wrong_coefficient": "software_exp2",
    "p_not_rounded": "p_rounded",
    "ds_from_unrounded_p": "ds_from_declared_p",
    "dq_missing_scale": "test_backward_catalogue and float16",
    "gqa_reduce_one_head": "gqa_head_mapping",
    "softcap_grad_wrong_sign": "softcap_formula",
}
SELFTEST = [
    *({"area": "attention", "impl": name, "path": "attention", "expect": "killed",
       "select": f"planted.fa4_{name} and ({scope})"} for name, scope in _SCOPES.items()),
    {"area": "attention", "impl": "correct", "path": "attention", "expect": "passes",
     "select": "planted.fa4_correct and (" + " or ".join(f"({s})" for s in _SCOPES.values())
               + ")"},
]
