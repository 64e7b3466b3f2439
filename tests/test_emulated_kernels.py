"""Our own GPU kernels' CPU emulations (the Triton kernel in Triton's interpreter, the FA4
numerics models) are not part of a CPU qualification by default (they test our kernels,
not the device): the default run reports them as skipped with the opt-in, and here, in the
project's tests, the whole attention area runs them with ``--emulated``."""

from __future__ import annotations

import pytest

from tests.conftest import SUITE

EMULATED = ("triton_fa", "fa4_model.sm90", "fa4_model.sm100")


# The Triton kernel in the interpreter costs 6 minutes for the whole area on 2 cores, float16
# and float32 about half each: the project tests run every check in float16 (the half type,
# whose bounds are the tight ones; float32 takes the same code with other loads and stores),
# bfloat16 and float64 where it declares them; float32 runs on a GPU (the campaign).
SCOPE = {"triton_fa": "triton_fa and not float32"}


@pytest.mark.parametrize("name", EMULATED)
def test_attention_area_passes_with_emulated(suite, name):
    run = suite(str(SUITE / "attention"), "-n", "0", "-q", "--emulated", "-k",
                SCOPE.get(name, name))
    rows = [r for r in run.report["results"] if r["impl"] == name]
    ran = [r for r in rows if r["outcome"] in ("passed", "failed", "error")]
    bad = [(r["nodeid"], r["reason"][:300]) for r in rows
           if r["outcome"] in ("failed", "error", "unexpected-pass")]
    assert run.returncode == 0 and not bad, (bad, run.output[-3000:])
    assert len(ran) >= 80, len(ran)  # the area's checks, not a handful
    assert "--emulated" in ran[0]["reproduce"]


def test_default_run_skips_them_with_the_opt_in(suite):
    run = suite(str(SUITE / "attention" / "test_attention.py"), "-n", "0", "-q", "-k",
                "test_forward_catalogue and float16 and nomask+nomod and "
                "(triton_fa or fa4_model or sdpa.math)")
    assert run.returncode == 0, run.output[-2000:]
    rows = {r["impl"]: r for r in run.report["results"]}
    assert rows["sdpa.math"]["outcome"] == "passed"
    for name in EMULATED:
        assert rows[name]["outcome"] == "skipped", rows[name]
        assert "opt in with --emulated" in rows[name]["reason"], rows[name]["reason"]
