"""The checks of every collectives area beyond small cases on WORLD (``scale.py`` says
what each profile runs); mixed into ``test_collectives.CollectiveTests``:

- ``test_subgroup``: the case on subgroups of non-adjacent ranks (a DeviceMesh dimension,
  two or more groups at once; ranks 0 and W - 1; all but rank 2), each group against the
  oracle at its own size, ranks, chunks and broadcast source being the group's.
- ``test_sizes``: one case per size class (1 element to 4 MiB per rank, odd counts, storage
  one element in), forward and backward.
- ``test_quiet_ranks``: ranks 0 and W - 1 (W - 1 alone at W = 2) give their outputs a
  zero cotangent (each rank still runs its backward: an implementation that skips its
  backward collective on a zero gradient leaves the other ranks waiting), the others a
  constant one expanded from one value (every stride 0, as ``y.sum()`` gives; ranks'
  values differ).
- ``test_double_backward`` (feature double_backward): d/dg of ⟨h, dL/dx⟩ is the forward of h.
- ``test_complex`` (feature complex): complex64, each part checked as a float32 case.
- ``test_first_collective`` (feature complex): the same case as the first collective of
  fresh rank processes (no warm-up: harness/history.py).
- ``test_world_one``: a group of one rank (the collective is the identity, or a chunk).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from conformance.areas.collectives.catalogue import REDUCING, bound, from_seed
from conformance.areas.collectives.checks import applies, check_case, require_returned, run
from conformance.harness.compare import elementwise_bound, exact
from conformance.harness.outcomes import missing as skip_missing
from conformance.harness.tensors import rounded
from conformance.processes.torchrun import active as torchrun_job
from oracles.collectives import U64

SEEDED = "conformance.areas.collectives.cases:seeded"
IN_GROUPS = "conformance.areas.collectives.cases:in_groups"
EAGER = "conformance.areas.collectives.cases:eager"
DOUBLE = "conformance.areas.collectives.cases:double_backward"
SIZE_TIMEOUT = 60.0  # seconds: a 4 MiB case on a loaded 2-core machine takes ~2 s


def fixed(op: str, world: int, rows: int, cols: int, seed: int) -> dict:
    """``from_seed``'s arguments for a fixed case of ``op``: dim 1 where the op has one,
    uneven splits, two coalesced tensors, the last rank as the broadcast source."""
    p: dict = {"rows": rows, "cols": cols}
    if op in ("all_gather_tensor", "reduce_scatter_tensor"):
        p["dim"] = 1 if cols > 1 else 0
    elif op == "all_to_all_single":
        p["splits"] = "uneven"
    elif op == "broadcast":
        p["src"] = world - 1
    elif op.endswith("coalesced"):
        p["count"] = 2
    return {"op": op, "world": world, "seed": seed, **p}


class ScaleTests:
    """Subgroups, sizes, quiet ranks, double backward, complex64 and world size 1
    (``op`` set by the subclass)."""

    op: str

    def test_subgroup(self, impl, backend, world, subgroup, reduce_op, device, record,
                      request):
        """Every group of the layout runs its own case (float32; sum, and max: its
        gradient goes to the group rank holding the maximum) at once; each group's ranks
        against the oracle at the group's size."""
        from conformance.areas.collectives.scale import subgroups

        applies(impl, backend, world, device, reduce_op)
        groups = subgroups(subgroup, world)
        assert groups is not None
        backward = impl.caps.claims("backward")
        cases = [from_seed(dtype="float32", reduce_op=_op(reduce_op),
                           **fixed(self.op, len(g), 2, 3, 7000 + 10 * world + i))
                 for i, g in enumerate(groups)]
        record.case(world=world, subgroup=subgroup, groups=[list(g) for g in groups],
                    **{k: v for k, v in cases[0].params.items() if k != "world"})
        payload = {"groups": [list(g) for g in groups], "mesh": subgroup == "mesh",
                   "cases": [c.payload(impl.spec, "contiguous", backward) for c in cases]}
        results = require_returned(record, run(request, IN_GROUPS, payload))
        busy = {r for g in groups for r in g}
        wrong = [r for r, res in enumerate(results) if res.get("idle", False) == (r in busy)]
        record.require(exact("every rank in its group", len(wrong), world,
                             f"ranks {wrong} ran in the wrong group or none"))
        for g, case in zip(groups, cases, strict=True):
            mine = [results[r] for r in g]
            names = [f"group {list(g)} rank {k} (global rank {r})" for k, r in enumerate(g)]
            check_case(record, case, mine, backward, names)

    def test_sizes(self, impl, dtype, backend, world, transport, size, device, record,
                   request):
        """One case of ``size`` elements per rank (storage one element in), sum, forward
        and backward; the ranks build the inputs from the case's seed. ``transport``: NCCL
        forced to an algorithm and protocol (thorough), else the backend's own choice."""
        from conformance.areas.collectives.scale import NCCL_VARIANTS, SIZES, size_shape
        from conformance.harness.tensors import dtype_name

        applies(impl, backend, world, device)
        n = SIZES[size]
        args = {**fixed(self.op, world, 1, 1, 8000 + n % 997), **size_shape(self.op, n),
                "dtype": dtype_name(dtype), "reduce_op": "sum"}
        if self.op in ("all_gather_tensor", "reduce_scatter_tensor"):
            args["dim"] = 0
        case = from_seed(**args)
        record.case(size=size, elements=n, layout="offset",
                    **{k: v for k, v in case.params.items() if k != "splits"})
        backward = impl.caps.claims("backward")
        env = NCCL_VARIANTS.get(transport, {})
        if env:
            record.note(transport=env)
        outcome = run(request, SEEDED, {"build": args, "spec": impl.spec, "layout": "offset",
                                        "backward": backward}, timeout=SIZE_TIMEOUT, env=env)
        check_case(record, case, require_returned(record, outcome), backward)

    def test_quiet_ranks(self, impl, backend, world, device, record, request):
        """Ranks 0 and W - 1 (at W = 2, rank 1 only): zero cotangents; the others: one
        value expanded (stride 0)."""
        applies(impl, backend, world, device)
        args = {**fixed(self.op, world, 3, 4, 9100 + world), "dtype": "float32"}
        case = from_seed(**args)
        quiet = [0, world - 1] if world >= 3 else [world - 1]  # never every rank
        for r in range(world):
            if r in quiet:
                case.cotangents[r] = _zeros(case.cotangents[r])
            else:
                case.cotangents[r] = _constant(case.cotangents[r])
        record.case(quiet_ranks=quiet, cotangent_layout="expanded", **case.params)
        if not impl.caps.claims("backward"):
            from conformance.harness.outcomes import unsupported

            unsupported(f"implementation {impl.name} does not declare backward")
        payload = {**case.payload(impl.spec), "cotangent_layout": "expanded"}
        check_case(record, case, require_returned(record, run(request, EAGER, payload)))

    @pytest.mark.needs("double_backward")
    def test_double_backward(self, impl, backend, world, device, record, request):
        """The backward differentiated again (float64, sum): d/dg ⟨h, dL/dx⟩ is the
        forward applied to h, on every rank (h random, shaped as the inputs)."""
        applies(impl, backend, world, device)
        args = {**fixed(self.op, world, 2, 3, 9301 + world), "dtype": "float64"}
        case = from_seed(**args)
        rng = np.random.default_rng(9302 + world)
        hs = [[rng.standard_normal(t.shape) for t in x] if isinstance(x, list)
              else rng.standard_normal(x.shape) for x in case.inputs]
        record.case(**case.params)
        outcome = run(request, DOUBLE, case.payload(impl.spec), hs)
        results = require_returned(record, outcome)
        want = case.forward(hs)
        limit = bound(case, hs, "forward")
        for r, res in enumerate(results):
            for i, (got, e, b) in enumerate(zip(res["gg"], want[r], limit[r], strict=True)):
                g = np.zeros_like(e) if got is None else np.asarray(got, np.float64)
                m = elementwise_bound("double backward", g, e, b + U64 * np.abs(e))
                record.require(type(m)(m.name, m.measured, m.bound,
                                       f"rank {r}, tensor {i}: {m.detail}", m.exact))

    @pytest.mark.needs("complex")
    def test_complex(self, impl, backend, world, device, record, request):
        """complex64 (sum), forward and backward: a collective with real coefficients acts
        on the real and the imaginary parts alike, so each part is checked as a float32
        case of its own (same bound; torch's gradient of a real loss through a real-linear
        map is the same map's adjoint on each part)."""
        applies(impl, backend, world, device)
        self._complex(impl, world, record, request, cold=False)

    @pytest.mark.needs("complex")
    def test_first_collective(self, impl, backend, world, device, record, request):
        """test_complex's case as the first collective of fresh rank processes (a pool of
        its own, no warm-up: what a job's first step does); every other case runs on warm
        ranks (harness/history.py)."""
        applies(impl, backend, world, device)
        if torchrun_job() is not None:
            skip_missing("the first collective of a process needs a pool of its own; under "
                         "torchrun the job's ranks made theirs already")
        record.note(first_collective_of_the_process=True)
        self._complex(impl, world, record, request, cold=True)

    def _complex(self, impl, world, record, request, cold: bool) -> None:
        __tracebackhide__ = True
        args = {**fixed(self.op, world, 2, 3, 9401 + world), "dtype": "float32"}
        if self.op in REDUCING:
            args["reduce_op"] = "sum"
        re = from_seed(**args)
        rng = np.random.default_rng(9402 + world)
        im = replace(re, inputs=_like(re.inputs, rng), cotangents=_like(re.cotangents, rng))
        record.case(dtype="complex64", **re.params)
        payload = {**re.payload(impl.spec), "dtype": "complex64",
                   "inputs": _join(re.inputs, im.inputs),
                   "cotangents": _join(re.cotangents, im.cotangents)}
        results = require_returned(record, run(request, EAGER, payload, cold=cold))
        wrong = [f"rank {r}: {res['y_dtype']}" for r, res in enumerate(results)
                 if any(d != "complex64" for d in res["y_dtype"])]
        record.require(exact("output dtype", len(wrong), len(results), "; ".join(wrong)))
        for part, case in (("real", re), ("imaginary", im)):
            take = np.real if part == "real" else np.imag
            parts = [{**res, "y_dtype": ["float32"] * len(res["y"]),
                      "y": [take(y) for y in res["y"]],
                      "grad": None if res["grad"] is None else
                      [None if g is None else take(g) for g in res["grad"]]}
                     for res in results]
            check_case(record, case, parts, True,
                       [f"rank {r} ({part} part)" for r in range(len(results))])

    def test_world_one(self, impl, backend, world, device, record, request):
        """A group of one: the output is the input (or its only chunk), the gradient the
        cotangent."""
        applies(impl, backend, world, device)
        args = {**fixed(self.op, 1, 2, 3, 9201), "dtype": "float32"}
        if self.op in REDUCING:
            args["reduce_op"] = "sum"
        case = from_seed(**args)
        record.case(**case.params)
        backward = impl.caps.claims("backward")
        outcome = run(request, EAGER, case.payload(impl.spec, "contiguous", backward))
        check_case(record, case, require_returned(record, outcome), backward)


def _like(values, rng):
    """float32-rounded standard normals shaped as ``values`` (arrays or lists of them)."""
    def one(v):
        return rounded(rng.standard_normal(v.shape), "float32")
    return [[one(t) for t in v] if isinstance(v, list) else one(v) for v in values]


def _join(re, im):
    """re + i im, per rank (arrays or lists of them)."""
    return [[a + 1j * b for a, b in zip(x, y, strict=True)] if isinstance(x, list)
            else x + 1j * y for x, y in zip(re, im, strict=True)]


def _op(reduce_op: str) -> str:
    return "sum" if reduce_op == "none" else reduce_op


def _zeros(g):
    return [np.zeros_like(t) for t in g] if isinstance(g, list) else np.zeros_like(g)


def _constant(g):
    def one(t):
        return np.full_like(t, t.flat[0]) if t.size else t
    return [one(t) for t in g] if isinstance(g, list) else one(g)
