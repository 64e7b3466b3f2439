"""Which round trips each profile runs (the rest are deselected and counted in the header).

AOTInductor and ExecuTorch lowering cost seconds per model on 2 cores (measured per
path in the report's ``build_seconds`` notes), so:

- ci: eager on every model and dtype; ``export`` on every model and variant in float32,
  and on one RNN, LSTM and GRU (the catalogue's ``ci_heavy``) with a dynamic batch in
  float16/bfloat16; the other export paths on those three and the three other models with
  a dynamic batch and a dynamic length; with a dynamic batch, aoti and aoti.checked on the
  LSTM (one C++ build: impls/export.py shares the package, aoti.checked costs its load) and
  executorch on the LSTM and the bidirectional GRU, executorch.portable on the LSTM
  (``CI_HEAVY``). Each other model costs
  one more C++ build (7 to 11 s cold on 2 cores) for a finding these already show: the AOTI
  runtime's unchecked static dims (expected_failures[36]) is the runtime's, and the RNN's
  ExecuTorch finding is the LSTM's (expected_failures[38]); the GRU's is its own ([39]).
  ``export.saved`` runs each program in a fresh process (impls/export_loader.py, ~3 s of
  a 2-core machine each): in ci its dynamic-length case is the while-loop LSTM's only.
- dev: ci, with aoti and executorch on every model with a dynamic batch and length (the
  while-loop LSTM's abort under AOTInductor shows there).
- thorough: everything.

test_shapes.py (shapes.py's cases; ``planned_shape``): in ci, eager and ``export`` on every
case, ``export.while_loop`` on the derived dim (the only case with a dim named "seq"; on
the others it traces as ``export`` does), ``export.saved`` on the unbatched and the packed
LSTM, executorch and executorch.portable on the LSTM without biases (aoti and aoti.checked
on the unbatched LSTM cost one more C++ build, 8 to 13 s: dev); dev: every path on every
case in float32;
thorough: every dtype.

Eager ignores ``dynamic_shapes`` (it runs at any size): it runs one variant ("auto").
``export.while_loop`` differs from ``export`` only with a dynamic length on an LSTM or GRU
(torch.export._patches): it runs the "seq" variant of those, in float32 (all dtypes in
thorough).
An implementation plugged in with ``--impl`` runs everything it declares.
"""

from __future__ import annotations

from conformance.areas.export.catalogue import MODELS

HEAVY = ("aoti", "aoti.checked", "executorch", "executorch.portable")
CI_HEAVY = {"aoti": ("lstm",), "aoti.checked": ("lstm",), "executorch": ("lstm", "gru_bi"),
            "executorch.portable": ("lstm",)}
PLANNED = ("eager", "export", "export.strict", "export.while_loop", "export.saved",
           "export.decomposed", *HEAVY)
WHILE_LOOP_KINDS = ("LSTM", "GRU", "seq_model")  # what torch.export._patches changes


def planned(impl: str, model: str, variant: str, dtype: str, profile: str) -> bool:
    if impl == "eager":
        return variant == "auto"
    if impl == "export.while_loop":  # other variants trace exactly as ``export`` does
        kind_ok = variant == "seq" and MODELS[model].kind in WHILE_LOOP_KINDS
        return kind_ok and (dtype == "float32" or profile == "thorough")
    if profile == "thorough" or impl not in PLANNED:
        return True
    heavy_subset = MODELS[model].ci_heavy
    if impl == "export":
        return dtype == "float32" or (variant == "batch" and (heavy_subset or profile != "ci"))
    if dtype != "float32":
        return False
    if impl in HEAVY:
        if profile == "dev":
            return variant in ("batch", "seq")
        return variant == "batch" and model in CI_HEAVY[impl]
    if impl == "export.saved" and profile == "ci" and variant == "seq":
        return model == "lstm"  # a served program costs a process: the while-loop one here
    return variant in ("batch", "seq") and (heavy_subset or not MODELS[model].recurrent
                                            or profile != "ci")


def planned_tf32(impl: str, profile: str) -> bool:
    """test_tf32.py (CUDA devices only): eager and ``export`` (the TF32 rule is about the
    device's kernels, which every path runs); every path in thorough."""
    return impl in ("eager", "export") or impl not in PLANNED or profile == "thorough"


CI_SHAPES = {"export.while_loop": ("lstm_derived",),
             "export.saved": ("lstm_unbatched", "lstm_packed"),
             "aoti": (), "aoti.checked": (),  # a C++ build each: dev
             "executorch": ("lstm_nobias",), "executorch.portable": ("lstm_nobias",),
             "export.strict": (), "export.decomposed": ()}


def planned_shape(impl: str, shape: str, dtype: str, profile: str) -> bool:
    """Whether test_shapes.py's ``test_shape[impl-dtype-...-shape]`` runs in ``profile``."""
    if profile == "thorough" or impl not in PLANNED:
        return True
    if dtype != "float32":
        return False
    if impl == "export.while_loop":
        return shape == "lstm_derived"
    return profile != "ci" or shape in CI_SHAPES.get(impl, (shape,))


def planned_calls(impl: str, dtype: str, profile: str) -> bool:
    """test_calls.py: every path in float32 (aoti's and executorch's two builds each in
    dev), every dtype in thorough; an implementation plugged in runs all it declares."""
    if impl not in PLANNED or profile == "thorough":
        return True
    return dtype == "float32" and (impl not in HEAVY or profile == "dev")
