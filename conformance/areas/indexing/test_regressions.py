"""Regression cases from real upstream indexing bugs, each on the run's device with the
bug's shapes, the destination a view inside a larger guarded storage.

- pytorch#189968 (MPS ``index_copy_``): no index validation; on ``storage[:5]`` index 8
  wrote ``storage[8]``, on ``storage[8:13]`` index -1 wrote ``storage[7]`` (index_copy_
  rejects every negative index).
- pytorch#189969 (MPS ``index_fill_``): two kernel paths, chosen by
  ``indices_numel * 16 >= dim_size`` (a mask, else a scatter); the mask path wrote past its
  mask, the scatter path past the view (index 40 on 32 rows) or, wrapping -38 once, before
  it. index_fill_ must accept [-size, -1] and wrap it.
- pytorch#189970 (MPS ``index_reduce_``): the index cast to uint32 unchecked: 2**32 + 1
  lands on row 1.
- pytorch#189971 (MPS ``embedding_bag``): ``> num_weights`` for ``>=``: index ==
  num_embeddings read the row after the table.
- pytorch#49882 (CUDA ``nll_loss2d``, open): with ``reduction='none'`` the kernel skips the
  target-range assert: a (N, C, d) input with a target of C.
- CPU ``index_reduce_(..., "prod")`` in float16 / bfloat16 with slices of one element and
  two or more indices raises ``iter.ninputs() == traits::arity INTERNAL ASSERT FAILED``
  (torch 2.11 and 2.13; found by this suite's fresh-seed runs): ``test_prod_unit_slices``.
  ``test_indexing``'s random valid cases leave exactly that configuration to it on CPU
  (``checks.KNOWN_CPU_BUGS``), so that a fresh seed does not fail on a known bug.
- pytorch#185885 / #169779 (Inductor): under ``torch.compile`` ``index_add_`` accepted index
  -1 and ``index_select`` wrapped it. Reproduced on torch 2.11 and 2.13 (CPU) for a fresh
  compile; after other shapes were compiled the same call may raise, so these cases run in
  a fresh isolated child on every device.
(CPU ``embedding_bag`` with decreasing offsets, found by this suite, is test_indexing's
``test_invalid[offset_decreasing]``, an expected failure on CPU.)
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conformance.areas.indexing.cases import Case
from conformance.areas.indexing.checks import literal_case, run_valid
from conformance.areas.indexing.ops import SPECS
from conformance.areas.indexing.verdicts import require_invalid, run_case, skip_if_costly
from conformance.harness.compare import Measurement, exact

LAYOUTS = pytest.mark.parametrize("layout", ["contiguous", "strided"])


def _data(rows: int, cols: int) -> list:
    return (np.arange(rows * cols, dtype=np.float64).reshape(rows, cols) / 8 + 0.5).tolist()


def _check(request, record, impl, dtype, device, conformance_state, layout, op, arrays,
           scalars, index, n, bad, at=0, index_dtype="int64", compiled=False):
    __tracebackhide__ = True
    dev = conformance_state.matrix.devices[conformance_state.device.matrix_key]
    skip_if_costly(dtype, dev.after_error)
    args = (op, arrays, scalars, index, n, bad, at, str(dtype).removeprefix("torch."),
            index_dtype, layout, impl.spec, str(device), compiled)
    record.case(layout=layout, bad=bad, at=at, n=n, compiled=compiled, **scalars)
    res = run_case(request, dev.isolate_errors or compiled, literal_case, args,
                   fresh=compiled)
    require_invalid(record, res, conformance_state.device.matrix_key, dev.after_error)



class TestIndexCopy:
    pytestmark = pytest.mark.area("indexing.index_copy_")

    @LAYOUTS
    @pytest.mark.parametrize("bad", [8, 5, -1], ids=lambda b: f"index{b}")
    def test_view_of_larger_storage(self, impl, dtype, device, record, request,
                                    conformance_state, layout, bad):
        """pytorch#189968: a 5-row view, one index out of range (or negative)."""
        arrays = {"x": ("data", _data(5, 3)), "index": ("index", [0, 2]),
                  "src": ("data", _data(2, 3))}
        _check(request, record, impl, dtype, device, conformance_state, layout,
               "index_copy_", arrays, {"dim": 0}, "index", 5, bad, at=1)


class TestIndexFill:
    pytestmark = pytest.mark.area("indexing.index_fill_")

    @LAYOUTS
    @pytest.mark.parametrize("path,count", [("scatter", 1), ("mask", 4)])
    @pytest.mark.parametrize("bad", [40, 32, -33, -38], ids=lambda b: f"index{b}")
    def test_both_kernel_paths(self, impl, dtype, device, record, request,
                               conformance_state, layout, path, count, bad):
        """pytorch#189969: 1 index of 32 rows takes the scatter path, 4 (4 * 16 >= 32) the
        mask path; valid negatives in the same call must still wrap."""
        index = [-1, 3, -32, 7][:count]
        arrays = {"x": ("data", _data(32, 2)), "index": ("index", index)}
        _check(request, record, impl, dtype, device, conformance_state, layout,
               "index_fill_", arrays, {"dim": 0, "value": 3.0}, "index", 32, bad,
               at=count - 1)


class TestIndexReduce:
    pytestmark = pytest.mark.area("indexing.index_reduce_")

    @LAYOUTS
    @pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
    def test_uint32_wrap(self, impl, dtype, device, record, request, conformance_state,
                         layout, reduce):
        """pytorch#189970: 2**32 + 1 must not land on row 1."""
        arrays = {"x": ("data", _data(4, 3)), "index": ("index", [0, 2]),
                  "src": ("data", _data(2, 3))}
        _check(request, record, impl, dtype, device, conformance_state, layout,
               "index_reduce_", arrays, {"dim": 0, "reduce": reduce, "include_self": True},
               "index", 4, 2**32 + 1, at=1)


class TestIndexReduceValid:
    pytestmark = pytest.mark.area("indexing.index_reduce_")

    @pytest.mark.parametrize("shape,dim,index", [((2, 1), 0, [0, 0]), ((1, 2), 1, [1, 0]),
                                                 ((1, 1, 1), 2, [0, 0, 0])], ids=str)
    def test_prod_unit_slices(self, impl, dtype, device, record, shape, dim, index):
        """Valid indices, slices of one element: the product equals the oracle's."""
        rows = int(np.prod(shape))
        src_shape = tuple(len(index) if d == dim else s for d, s in enumerate(shape))
        case = Case("index_reduce_", {
            "x": ("data", np.asarray(_data(rows, 1)).reshape(shape)),
            "index": ("index", np.asarray(index)),
            "src": ("data", np.asarray(_data(int(np.prod(src_shape)), 1)).reshape(src_shape))},
            {"dim": dim, "reduce": "prod", "include_self": True}, n=shape[dim], dest="x")
        record.case(shape=shape, dim=dim, index=index)
        res = run_valid(impl, SPECS["index_reduce_"], case, dtype, "int64", "contiguous", device)
        problems = res["structure"] + res["values"] + res["guards"]
        record.require(Measurement("values within the accumulation bound (checks.py)",
                                   res["ratio"] or 0.0, 1.0, "; ".join(problems))
                       if not res["structure"] else
                       exact("result structure", 1, 1, "; ".join(res["structure"])))


class TestEmbeddingBag:
    pytestmark = pytest.mark.area("indexing.embedding_bag")

    def _arrays(self, offsets: list[int]) -> dict:
        return {"index": ("index", [0, 2, 1]), "weight": ("data", _data(3, 4)),
                "offsets": ("index", offsets)}

    @LAYOUTS
    @pytest.mark.parametrize("mode", ["sum", "mean", "max"])
    def test_index_equal_to_num_embeddings(self, impl, dtype, device, record, request,
                                           conformance_state, layout, mode):
        """pytorch#189971: index == num_embeddings (3) must raise, in every mode."""
        _check(request, record, impl, dtype, device, conformance_state, layout,
               "embedding_bag", self._arrays([0, 2]),
               {"mode": mode, "include_last_offset": False, "padding_idx": None},
               "index", 3, 3, at=1)


class TestNllLoss:
    pytestmark = pytest.mark.area("indexing.nll_loss")

    @pytest.mark.parametrize("reduction", ["none", "mean"])
    @pytest.mark.parametrize("bad", [5, -1], ids=lambda b: f"target{b}")
    def test_spatial_target_out_of_range(self, impl, dtype, device, record, request,
                                         conformance_state, reduction, bad):
        """pytorch#49882: a (N, C, d) input goes through nll_loss2d."""
        logp = (-np.abs(np.asarray(_data(8, 5))).reshape(2, 5, 4)).tolist()
        arrays = {"x": ("data", logp), "target": ("int64", [[0, 1, 2, 3], [4, 0, 1, 2]])}
        _check(request, record, impl, dtype, device, conformance_state, "contiguous",
               "nll_loss", arrays, {"ignore_index": -100, "reduction": reduction}, "target",
               5, bad, at=5)


# torch.compile(impl): only for implementations that declare they can be compiled
# (conformance_features "compile", an opt-in feature: conformance/harness/registry.py)
COMPILED = pytest.mark.parametrize("dtype", [pytest.param(torch.float32, id="float32")])
NEEDS_COMPILE = pytest.mark.needs("compile")


class TestIndexAdd:
    pytestmark = pytest.mark.area("indexing.index_add_")

    @COMPILED
    @NEEDS_COMPILE
    def test_compiled(self, impl, dtype, device, record, request, conformance_state):
        """pytorch#185885: ``torch.compile(index_add_)`` must reject -1."""
        arrays = {"x": ("data", _data(4, 5)), "index": ("index", [1, 2, 0]),
                  "src": ("data", _data(3, 5))}
        _check(request, record, impl, dtype, device, conformance_state, "contiguous",
               "index_add_", arrays, {"dim": 0, "alpha": 1}, "index", 4, -1, at=2,
               compiled=True)


class TestIndexSelect:
    pytestmark = pytest.mark.area("indexing.index_select")

    @COMPILED
    @NEEDS_COMPILE
    def test_compiled(self, impl, dtype, device, record, request, conformance_state):
        """pytorch#169779: ``torch.compile(index_select)`` must reject -1."""
        arrays = {"x": ("data", _data(4, 5)), "index": ("index", [1, 2, 0])}
        _check(request, record, impl, dtype, device, conformance_state, "contiguous",
               "index_select", arrays, {"dim": 0}, "index", 4, -1, at=2, compiled=True)
