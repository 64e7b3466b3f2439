"""Indexing conformance: valid indices against a numpy oracle, invalid indices must raise.

One class per area (``indexing.<op>``, the op's torch name), made from each entry of
``ops.SPECS`` (``Test`` + the op's name in CamelCase: ``TestIndexSelect``). Every test runs
per registered implementation and per dtype of the area:

- ``test_valid`` (Hypothesis): shapes with zero-size dims, every dim (negative too),
  duplicate indices, negative indices where the op wraps them, int32 and int64 index
  dtypes, non-contiguous operands inside guarded storage: exact (or bounded) results, no
  write outside the operands, inputs unchanged.
- ``test_invalid[kind]``: one invalid index of each kind, for each option set of the op and
  each index dtype: raises IndexError / RuntimeError (AcceleratorError) at the call or no
  later than the next synchronisation (else *silent out-of-bounds*), with a message that
  names the problem, without writing outside the destination, and the device behaves as
  the matrix declares afterwards. On devices whose matrix entry says ``errors.isolate``
  (every accelerator) each case runs in a child process (``conformance.processes.isolate``).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conformance.areas.indexing.checks import invalid_case, known_cpu_bug, run_valid
from conformance.areas.indexing.memory import LAYOUTS
from conformance.areas.indexing.ops import DEFAULTS, SPECS, OpSpec, invalid_params, kinds
from conformance.areas.indexing.verdicts import require_invalid, run_case, skip_if_costly, summary
from conformance.harness.compare import Measurement, exact


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kind" in metafunc.fixturenames and metafunc.cls is not None:
        metafunc.parametrize("kind", kinds(SPECS[metafunc.cls.op]))


@st.composite
def valid_params(draw: st.DrawFn, spec: OpSpec) -> dict[str, Any]:
    ndim = draw(st.integers(spec.min_ndim, spec.max_ndim), label="ndim")
    shape = tuple(draw(st.integers(0, 5), label=f"size[{i}]") for i in range(ndim))
    params = dict(DEFAULTS, shape=shape, dim=draw(st.integers(-4, 3), label="dim"),
                  k=draw(st.integers(0, 7), label="index count"),
                  negative=draw(st.booleans(), label="negative indices"),
                  bags=draw(st.integers(1, 4), label="bags"),
                  seed=draw(st.integers(0, 2**32 - 1), label="seed"))
    for name, choices in spec.options.items():
        params[name] = draw(st.sampled_from(choices), label=name)
    return params


class IndexingTests:
    """The checks every indexing area runs; subclasses set ``op``."""

    op: str

    # one method shared by the area classes (they differ only by ``op``)
    @settings(suppress_health_check=[*settings().suppress_health_check,
                                     HealthCheck.differing_executors])
    @given(data=st.data())
    def test_valid(self, impl, dtype, device, record, data):
        spec = SPECS[self.op]
        params = data.draw(valid_params(spec), label="params")
        index_dtype = data.draw(st.sampled_from(spec.index_dtypes), label="index dtype")
        layout = data.draw(st.sampled_from(LAYOUTS), label="layout")
        record.case(index_dtype=index_dtype, layout=layout, **params)
        # a known CPU bug's configuration is its regression case's (an expected failure)
        assume(device.type != "cpu" or known_cpu_bug(self.op, params, dtype) is None)
        res = run_valid(impl, spec, spec.build(params), dtype, index_dtype, layout, device)
        record.require(exact("result structure", len(res["structure"]), 1,
                             "; ".join(res["structure"])))
        if res["ratio"] is None:
            record.require(exact("values equal the oracle's", len(res["values"]), 1,
                                 "; ".join(res["values"])))
        else:  # an accumulation: error / bound at the worst element
            record.require(Measurement("values within the accumulation bound (checks.py)",
                                       res["ratio"], 1.0, "; ".join(res["values"])))
        for name, key in (("no write outside the operands", "guards"),
                          ("inputs unchanged", "inputs")):
            record.require(exact(name, len(res[key]), max(len(res[key]), 1),
                                 "; ".join(res[key])))

    def test_invalid(self, impl, dtype, device, record, rng, kind, conformance_state,
                     request):
        spec = SPECS[self.op]
        dev = conformance_state.matrix.devices[conformance_state.device.matrix_key]
        skip_if_costly(dtype, dev.after_error)
        seed = int(rng.integers(2**31))
        runs = []
        for variant in spec.invalid:
            for index_dtype in spec.index_dtypes:
                args = (self.op, invalid_params(spec, variant, seed), kind,
                        str(dtype).removeprefix("torch."), index_dtype, "strided", impl.spec,
                        str(device))
                res = run_case(request, dev.isolate_errors, invalid_case, args)
                runs.append((variant, index_dtype, res))
        applicable = [r for r in runs if r[2].get("applies")]
        if not applicable:
            pytest.skip(f"[unsupported] kind {kind} does not apply to {self.op} "
                        f"(index dtypes {spec.index_dtypes})")
        record.note(outcomes=[{"variant": v, "index_dtype": i, **summary(r)}
                              for v, i, r in applicable])
        for variant, index_dtype, res in applicable:
            record.case(kind=kind, index_dtype=index_dtype, **variant,
                        **({"bad": res["bad"]} if "bad" in res else {}))
            require_invalid(record, res, conformance_state.device.matrix_key, dev.after_error)


def _area_class(op: str) -> type:
    """The test class of area ``indexing.<op>``: ``IndexingTests`` for that op."""
    name = "Test" + "".join(word.title() for word in op.strip("_").split("_"))
    return type(name, (IndexingTests,), {
        "op": op, "pytestmark": pytest.mark.area(f"indexing.{op}"), "__module__": __name__,
        "__doc__": f"The checks of area indexing.{op}."})


# one class per spec, so that an op added to SPECS is tested with no edit here (the ids
# are the classes' names: ``TestIndexSelect::test_valid[...]``)
globals().update({cls.__name__: cls for cls in map(_area_class, SPECS)})
