"""Blind planted graph runtimes (``--impl graphs=planted.blind_graph_runtimes:NAME``).

Written WITHOUT reading how the suite checks the area ``graphs``: only from the contract in
``impls/graphs.py``'s docstring, the CPU reference runtime in ``tests/planted/graph_runtime.py``
(subclassed here; its own faults are not repeated) and upstream PyTorch reports on CUDA
graphs, ``make_graphed_callables`` and graph-safe RNG. Each runtime below is a bug a real
graph runtime could have; ``correct`` is the twin that has none of them and must pass.

The CPU stand-in for a graph (adapted after the fact, behaviour unchanged): the reference's
aten tape (``graph_runtime.Graph``): capture records what ``fn`` does once on the static
inputs; a replay runs the tape on the static inputs and writes the tensors of the capture,
never calling ``fn``. What a real graph bakes in at capture (addresses, Philox seeds and
offsets, host-read scalars, the executable chosen) is modelled where a fault needs it. As
written the faults sat on the old reference, whose replay called ``fn`` again; each keeps
its wrong behaviour on top of the tape (a skipped replay skips the tape, a staging buffer is
what the tape reads, a frozen sampler's numbers are played back into the tape's call).

Extension of the contract, as the blind helper assumed it and as impls/graphs.py now
documents it (``correct`` implements all of it, the faults inherit it):

- ``capture(fn, *static_inputs, pool=None, generators=(g, ...))`` (feature ``generators``):
  non-default ``torch.Generator`` objects that ``fn`` draws from (CUDAGraph's
  ``register_generator_state``, pytorch/pytorch#114068): each replay draws from them as eager
  does and advances them. Kept as a thin adapter: ``graph.register_generator_state(
  generator)`` after capture (the generator's state at registration is taken as the state the
  capture started from).
- ``graph.reset()`` (feature ``reset``): releases the graph and its memory
  (``memory_allocated`` drops by what it held); replaying a reset graph raises; a new capture
  (``capture(..., graph=the_reset_graph)`` records into that object, or a fresh one) must
  record anew (it may not return a cached executable that ignores what changed).
- ``capture_error_mode=`` (feature ``capture_error_mode``): ``"global"`` (default),
  ``"thread_local"``, ``"relaxed"``, anything else refused (the reference's check). Host
  synchronisations inside capture raise (``.item()``, ``float(t)``, ``bool(t)``, ``int(t)``:
  anything reading a device scalar); the blind helper used only ``"global"``.

Faults (one line each; the docstrings say more):

- ``captures_nothing``: replay does nothing (a CPU "capture" recorded no kernels);
- ``version_dirty_check``: replay skipped when no static input's version counter moved;
- ``first_element_dirty_check``: replay skipped when every input's first element is as
  at the last run;
- ``byte_count_staging``: inputs staged by a copy of ``numel`` bytes instead of
  ``nbytes`` (float32: only the first quarter of each input is refreshed);
- ``mutation_lost``: inputs staged into private buffers; in-place updates of an input by
  ``fn`` are not copied back;
- ``rng_ignores_eager_draws``: the runtime keeps its own RNG position for its graphs
  (synced only on a reseed); eager draws between two replays are not seen (graphed -> eager
  -> graphed repeats the eager call's numbers);
- ``rng_global_not_advanced``: replays draw the right numbers but do not advance the
  default generator (the eager call after a replay repeats the replay's numbers);
- ``rng_frozen_generator``: registered non-default generators are restored to their
  capture state each replay (no whole-graph increment for them);
- ``frozen_distributions``: only uniform/normal/dropout are graph-safe; ``randint``,
  ``randperm``, ``multinomial``, ``exponential_``, ``torch.bernoulli(probs)`` and friends
  replay the capture's numbers;
- ``rng_pool_shared_offset``: graphs sharing a pool share one RNG offset slot: a later
  graph of the pool draws the numbers its first graph drew;
- ``cache_by_code``: captures cached by (code object, input ids), ignoring closures and
  modules' parameters: capturing a second function from the same code on the same inputs
  returns the first function's graph, ``reset()`` does not evict it;
- ``reset_keeps_memory``: ``reset()`` keeps the graph's pool (its memory is still counted);
- ``sync_check_item_only``: the host-sync check patches ``Tensor.item`` only; ``float(t)``,
  ``bool(t)``, ``int(t)`` and ``tolist()`` pass and their capture-time values are baked in;
- ``pool_scratch_in_live_outputs``: a graph captured into another's pool uses that graph's
  live outputs as scratch (same dtype, enough elements), overwriting them at replay;
- ``graphed_stale_activations``: a graphed module whose backward uses the activations of the
  capture (sample_args), not those of the latest forward;
- ``graphed_no_input_grad``: a graphed module that copies inputs into its static buffers
  without autograd, so no gradient reaches its inputs (nor modules before it).

Killed by (``AFTER``, asserted by tests/test_graph_blind.py in CI; ``TODAY`` is the record at
0f79775; before = TODAY's verdict; ids are conformance/areas/graphs tests, float32):

=============================  ===========  ===================================================
fault                          before       killed by (the check)
=============================  ===========  ===================================================
captures_nothing               killed       test_replay_equals_eager[...-mlp] (replay == eager)
version_dirty_check            killed       test_two_graphs_interleaved_rng[...-own] (replay
                                            counter; also test_random's values)
first_element_dirty_check      killed       test_two_graphs_interleaved_rng[...-own] (same)
byte_count_staging             killed       test_replay_equals_eager[...-mlp]
mutation_lost                  survived     test_input_mutated_in_place (new: the caller's
                                            input holds the in-place update)
rng_ignores_eager_draws        survived     test_graphed_eager_graphed_rng (pitfalls, e92e315)
rng_global_not_advanced        killed       test_graphed_eager_graphed_rng
rng_frozen_generator           survived     test_registered_generator (pitfalls, e92e315)
frozen_distributions           killed       test_two_graphs_interleaved_rng[...-own]
rng_pool_shared_offset         survived     test_two_graphs_interleaved_rng[...-shared] (new:
                                            the second graph in the first's pool)
cache_by_code                  survived     test_same_code_new_weights (new: one code, other
                                            weights, one static input)
reset_keeps_memory             survived     test_memory_over_captures (pitfalls, e92e315)
sync_check_item_only           survived     test_sync_in_capture[...-tolist] (pitfalls; also
                                            [...-nonzero])
pool_scratch_in_live_outputs   killed       test_shared_pool
graphed_stale_activations      killed       test_graphed_training
graphed_no_input_grad          survived     test_graphed_training (changed: eager model[0] ->
                                            graphed model[1:], the sample requires grad)
correct, correct_staged        pass         every killing test above
=============================  ===========  ===================================================
"""

from __future__ import annotations

from .blind_graph_base import Runtime
from .blind_graph_lifetime_faults import (
    _CacheByCode,
    _ItemOnlyCheck,
    _ItemOnlyRuntime,
    _NoInputGrad,
    _ResetKeepsMemory,
    _ScratchInLiveOutputs,
    _StaleActivations,
)
from .blind_graph_replay_faults import (
    _ByteCountStaging,
    _CapturesNothing,
    _FirstElementDirty,
    _FrozenDistributions,
    _FrozenGenerator,
    _GlobalNotAdvanced,
    _MutationLost,
    _OwnRngStream,
    _PoolSharedOffset,
    _Staged,
    _VersionDirty,
)

# --------------------------------------------------------------------------------------------
# the runtimes


correct = Runtime("blind_correct")
captures_nothing = Runtime("captures_nothing", _CapturesNothing)
version_dirty_check = Runtime("version_dirty_check", _VersionDirty)
first_element_dirty_check = Runtime("first_element_dirty_check", _FirstElementDirty)
byte_count_staging = Runtime("byte_count_staging", _ByteCountStaging)
mutation_lost = Runtime("mutation_lost", _MutationLost)
rng_ignores_eager_draws = Runtime("rng_ignores_eager_draws", _OwnRngStream)
rng_global_not_advanced = Runtime("rng_global_not_advanced", _GlobalNotAdvanced)
rng_frozen_generator = Runtime("rng_frozen_generator", _FrozenGenerator)
frozen_distributions = Runtime("frozen_distributions", _FrozenDistributions)
rng_pool_shared_offset = Runtime("rng_pool_shared_offset", _PoolSharedOffset)
cache_by_code = _CacheByCode("cache_by_code")
reset_keeps_memory = Runtime("reset_keeps_memory", _ResetKeepsMemory)
sync_check_item_only = _ItemOnlyRuntime("sync_check_item_only", _ItemOnlyCheck)
pool_scratch_in_live_outputs = Runtime("pool_scratch_in_live_outputs", _ScratchInLiveOutputs)
graphed_stale_activations = Runtime("graphed_stale_activations", graphed_class=_StaleActivations)
graphed_no_input_grad = Runtime("graphed_no_input_grad", graphed_class=_NoInputGrad)

# the correct twin on the staging path (full copy in, mutations copied back)
correct_staged = Runtime("blind_correct_staged", _Staged)

# verdicts of today's suite (0f79775, torch 2.13 CPU, ``pytest conformance/areas/graphs
# --no-builtins --impl graphs=planted.blind_graph_runtimes:NAME``); test ids are
# conformance/areas/graphs/<file>::<test>; the first float32 one is named where many fail
_G = "test_graphs.py::"
_R = "test_regressions.py::"
TODAY: dict[str, str] = {
    "correct": "passes (correct)",
    "correct_staged": "passes (correct)",
    "captures_nothing": f"killed by {_G}test_replay_equals_eager[captures_nothing-float32-mlp] "
                        "(18 tests: every workload, test_random, test_shared_pool, "
                        "test_illegal_capture, 3 regressions)",
    "version_dirty_check": f"killed by {_G}test_random[version_dirty_check-float32] and "
                           f"{_R}test_two_graphs_interleaved_rng[version_dirty_check]",
    "first_element_dirty_check": f"killed by {_G}test_random[first_element_dirty_check-float32] "
                                 f"and {_R}test_two_graphs_interleaved_rng"
                                 "[first_element_dirty_check]",
    "byte_count_staging": f"killed by {_G}test_replay_equals_eager[byte_count_staging-float32-"
                          "mlp] (15 tests: every workload, test_shared_pool, "
                          "test_illegal_capture, 2 regressions)",
    "mutation_lost": "survives",
    "rng_ignores_eager_draws": "survives",
    "rng_global_not_advanced": f"killed by {_R}test_two_graphs_interleaved_rng"
                               "[rng_global_not_advanced]",
    "rng_frozen_generator": "survives (no test passes a non-default generator)",
    "frozen_distributions": f"killed by {_G}test_random[frozen_distributions-float32] and "
                            f"{_R}test_two_graphs_interleaved_rng[frozen_distributions]",
    "rng_pool_shared_offset": "survives",
    "cache_by_code": "survives",
    "reset_keeps_memory": "survives (no test calls reset())",
    "sync_check_item_only": "survives",
    "pool_scratch_in_live_outputs": f"killed by {_G}test_shared_pool"
                                    "[pool_scratch_in_live_outputs-float32]",
    "graphed_stale_activations": f"killed by {_G}test_graphed_training"
                                 "[graphed_stale_activations-float32]",
    "graphed_no_input_grad": "survives",
}

# after the checks were mended (tests/test_graph_blind.py asserts it): fault -> (the test
# that kills it in CI, float32, and the check that says so)
KILLED_BY: dict[str, tuple[str, str]] = {
    "captures_nothing": ("test_replay_equals_eager[captures_nothing-float32-mlp]",
                        "replay == eager (outputs)"),
    "version_dirty_check": ("test_two_graphs_interleaved_rng[version_dirty_check-own]",
                           "the graph's replay counter equals the replays asked for"),
    "first_element_dirty_check": ("test_two_graphs_interleaved_rng[first_element_dirty_check-own]",
                                 "the graph's replay counter equals the replays asked for"),
    "byte_count_staging": ("test_replay_equals_eager[byte_count_staging-float32-mlp]",
                          "replay == eager (outputs)"),
    "mutation_lost": ("test_input_mutated_in_place[mutation_lost]",
                     "the input updated in place == eager's"),
    "rng_ignores_eager_draws": ("test_graphed_eager_graphed_rng[rng_ignores_eager_draws]",
                               "graphed -> eager -> graphed == eager x 6"),
    "rng_global_not_advanced": ("test_graphed_eager_graphed_rng[rng_global_not_advanced]",
                               "graphed -> eager -> graphed == eager x 6"),
    "rng_frozen_generator": ("test_registered_generator[rng_frozen_generator]",
                            "of a generator seeded the same"),
    "frozen_distributions": ("test_two_graphs_interleaved_rng[frozen_distributions-own]",
                            "interleaved replays == interleaved eager calls"),
    "rng_pool_shared_offset": ("test_two_graphs_interleaved_rng[rng_pool_shared_offset-shared]",
                              "interleaved replays == interleaved eager calls"),
    "cache_by_code": ("test_same_code_new_weights[cache_by_code]",
                     "the second graph == its MLP (other weights)"),
    "reset_keeps_memory": ("test_memory_over_captures[reset_keeps_memory]",
                          "memory allocated flat over"),
    "sync_check_item_only": ("test_sync_in_capture[sync_check_item_only-tolist]",
                            "capture with tolist inside raises"),
    "pool_scratch_in_live_outputs": ("test_shared_pool[pool_scratch_in_live_outputs-float32]",
                                    "the first graph's outputs after the second replayed"),
    "graphed_stale_activations": ("test_graphed_training[graphed_stale_activations-float32]",
                                 "step 1: parameters"),
    "graphed_no_input_grad": ("test_graphed_training[graphed_no_input_grad-float32]",
                             "step 1: parameters"),
}
AFTER: dict[str, str] = {name: f"killed by {test}" for name, (test, _) in KILLED_BY.items()}
AFTER.update({"correct": "passes (correct)", "correct_staged": "passes (correct)"})
