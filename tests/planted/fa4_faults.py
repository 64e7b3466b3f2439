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
# control: the spec's configuration under another name
correct = _model.with_config("planted.fa4_correct")
