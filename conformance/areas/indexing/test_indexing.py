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
from conformance.areas.indexing.ops import (
    DEFAULTS,
    SPECS,
    TIER_KINDS,
    OpSpec,
    fine_data,
    invalid_params,
    kinds,
    large_valid_params,
)
from conformance.areas.indexing.verdicts import require_invalid, run_cases, skip_if_costly, summary
from conformance.harness.compare import Measurement, exact
from conformance.harness.outcomes import not_run


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
        _require_valid(record, res)

    def test_large(self, impl, dtype, device, record, rng, conformance_state):
        """The large tier's valid cases: 4099 indices into a dim of 3 (> 1000 terms per
        element, many blocks and vectors of work) for each option set but products and
        max_norm (ci: the first of them)."""
        spec = SPECS[self.op]
        seed = int(rng.integers(2**31))
        ran = 0
        sets = [(v, p) for v in spec.invalid
                for p in [large_valid_params(spec, v, seed)] if p is not None]
        for variant, params in sets[:1] if conformance_state.profile == "ci" else sets:
            for index_dtype in spec.index_dtypes:
                record.case(index_dtype=index_dtype, **variant)
                case = fine_data(spec.build(params), seed)
                _require_valid(record, run_valid(impl, spec, case,
                                                 dtype, index_dtype, "strided", device))
                ran += 1
        if not ran:
            pytest.skip(f"[unsupported] {self.op}: every option set is a product")

    def test_invalid(self, impl, dtype, device, record, rng, kind, conformance_state,
                     request):
        spec = SPECS[self.op]
        dev = conformance_state.matrix.devices[conformance_state.device.matrix_key]
        skip_if_costly(dtype, dev.after_error)
        seed = int(rng.integers(2**31))
        variants = tier_variants(spec, conformance_state.profile) if kind in TIER_KINDS \
            else spec.invalid
        cases = [(v, i) for v in variants for i in spec.index_dtypes]
        results = run_cases(request, dev.isolate_errors, dev.after_error, invalid_case,
                            [(self.op, invalid_params(spec, v, seed, kind), kind,
                              str(dtype).removeprefix("torch."), i, "strided", impl.spec,
                              str(device)) for v, i in cases])
        if results and "not_run" in results[-1]:
            not_run(results[-1]["not_run"])
        runs = [(v, i, res) for (v, i), res in zip(cases, results, strict=False)]
        stopped = ""  # the first crash or hang ends the test
        if results and "crashed" in results[-1] and len(results) < len(cases):
            stopped = f"{len(cases) - len(results)} later case(s) not run after: " + \
                results[-1]["crashed"].splitlines()[0]
        applicable = [r for r in runs if r[2].get("applies")]
        if not applicable:
            pytest.skip(f"[unsupported] kind {kind} does not apply to {self.op} "
                        f"(index dtypes {spec.index_dtypes})")
        record.note(outcomes=[{"variant": v, "index_dtype": i, **summary(r)}
                              for v, i, r in applicable], **({"stopped": stopped}
                                                             if stopped else {}))
        for variant, index_dtype, res in applicable:
            record.case(kind=kind, index_dtype=index_dtype, **variant,
                        **({"bad": res["bad"]} if "bad" in res else {}))
            require_invalid(record, res, conformance_state.device.matrix_key, dev.after_error)


def tier_variants(spec: OpSpec, profile: str) -> tuple[dict[str, Any], ...]:
    """The option sets the large tier's invalid cases run: all, the first one in ci."""
    return spec.invalid[:1] if profile == "ci" else spec.invalid


def _require_valid(record, res: dict[str, Any]) -> None:
    __tracebackhide__ = True
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


def _area_class(op: str) -> type:
    """The test class of area ``indexing.<op>``: ``IndexingTests`` for that op."""
    name = "Test" + "".join(word.title() for word in op.strip("_").split("_"))
    return type(name, (IndexingTests,), {
        "op": op, "pytestmark": pytest.mark.area(f"indexing.{op}"), "__module__": __name__,
        "__doc__": f"The checks of area indexing.{op}."})


# one class per spec, so that an op added to SPECS is tested with no edit here (the ids
# are the classes' names: ``TestIndexSelect::test_valid[...]``)
globals().update({cls.__name__: cls for cls in map(_area_class, SPECS)})
