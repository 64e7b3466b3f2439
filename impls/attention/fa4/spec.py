"""The FA4-style algorithm, stated once: the numerics model (model.py) and the CuTe DSL
kernels (sm90.py, sm100.py) implement exactly these steps and constants.

Forward, per (batch, query head, row r of a Q tile of BLOCK_M rows); kv tiles of BLOCK_N
columns are visited from the last to the first (the tile holding a causal diagonal comes
first, as in FA4), tiles with no live entry for the whole Q tile are skipped:

 1. S = Q K^T with fp32 accumulation (tensor-core MMA; modelled as the exact dot product of
    the 16-bit inputs rounded once to fp32).
 2. Without a score_mod: x = S and the exponent scale is c = scale * log2(e).
    With a score_mod: x = score_mod(fp32(S * scale), b, h, q, kv) and c = log2(e).
 3. Masked entries (mask_mod false, or kv >= Sk) get x = -inf.
 4. Tile row max t = max_j x_j; running max m (starts at -inf), running sum l = 0, O = 0.
    m_new = max(m, t).  If (m_new - m) * c > RESCALE_THRESHOLD (log2 units), or m = -inf:
    alpha = exp2((m - m_new) * c) (1 if m = -inf), O *= alpha, l *= alpha, m = m_new.
    Otherwise m stays (stale): no rescaling, and P below may reach 2**RESCALE_THRESHOLD.
 5. mc = m * c, or 0 when m = -inf (a row with nothing live so far).
    y_j = fma(x_j, c, -mc) in fp32; P_j = exp2(y_j): hardware ex2.approx for most columns,
    the software exp2 (below) for columns j of the tile with j % 32 >= EMU_FROM
    (sm100 only; sm90 uses the hardware exp2 everywhere).
 6. l += sum_j P_j (fp32, unrounded P).  P rounded to the input dtype (RNE); O += P_r V
    (fp32 accumulation).
 7. End: l == 0 (a fully masked row) gives out = 0, lse = -inf.  Otherwise
    out = dtype(O * (1 / l)), lse = (mc + log2(l)) * ln(2)  (natural log, fp32).

Software exp2 (sm100): y = max(y, -127); j = floor(y); f = y - j in [0, 1);
p = fma(fma(fma(C3, f, C2), f, C1), f, 1.0) (Horner, fp32 FMAs);
result = bitcast_f32(bitcast_i32(p) + (j << 23)).  Max relative error of p on [0, 1):
1.03e-4 (2**-13.2), p(0) = 1 and p(1) = 2 exactly (coefficients: our own minimax fit,
scripts in tests/test_fa4_model.py).

Backward (dK/dV per kv tile with an inner loop over q tiles, dQ accumulated in fp32 across
kv tiles in kv-tile order):
 1. Delta = rowsum(fp32(dO) * fp32(O)); L2 = lse * log2(e) (+inf on fully masked rows).
 2. x, c as forward steps 1-3; P = exp2(fma(x, c, -L2)) (hardware exp2), 0 where masked.
 3. dV += P_r^T dO (P rounded to the input dtype).
 4. dP = dO V^T (fp32); dS = P * (dP - Delta) (fp32, unrounded P), times the score_mod's
    derivative where there is one; dS_r = dS rounded to the input dtype.
 5. dK += dS_r^T Q, dQ += dS_r K (fp32); at the end dK, dQ *= scale (after the score_mod
    derivative), dK/dV summed over the query heads of a GQA group, rounded to the dtype.

What the two kernels' backward passes fix beyond that (BWD below):
 - tiles: dK/dV visit a kv tile's q tiles in increasing order; dQ is owned by one CTA per q
   tile (a separate dQ kernel, no atomics: deterministic) and accumulates its kv tiles in
   increasing order.  sm90: 64 x 64 tiles; sm100: 128 x 128.
 - the P in step 4: sm90 keeps the fp32 P; sm100 keeps only the 16-bit P_r (written to TMEM
   for the dV MMA) and computes dS = fp32(P_r) * (dP - Delta).
 - the score_mod derivatives: softcap x = cap tanh(z / cap) gives 1 - t*t with t = x / cap
   (fp32, correctly rounded division; the tanh is not recomputed); ALiBi (additive) gives 1.
"""

from __future__ import annotations

import math

BLOCK_M = 128
BLOCK_N = 128
RESCALE_THRESHOLD = 8.0  # log2 units, 16-bit inputs
EMU_FROM = 24  # software exp2 on columns j % 32 >= 24 (a quarter), sm100
EXP2_POLY = (1.0, 0.6954243183135986, 0.226307675242424, 0.07826796919107437)  # fp32 values
LOG2E = math.log2(math.e)
LN2 = math.log(2.0)

# Backward, per kernel: (q-tile rows, kv-tile columns), dS from the rounded P
BWD = {
    "sm90": {"tile": (64, 64), "ds_from_rounded_p": False},
    "sm100": {"tile": (128, 128), "ds_from_rounded_p": True},
}
