"""Every variant of our FA4-style CuTe DSL kernels compiles on this CPU machine (sm90 forward
and backward for sm_90a, sm100 forward for sm_100a), and its registers, shared memory and
spills are those of the committed tables (docs/results/fa4-sm90-compile.md,
fa4-sm100-compile.md). A variant that stops compiling fails here; a change in resources
fails until the table is regenerated (``python -m impls.attention.fa4.sm90.variants
--table``, ``... .sm100.variants --table``) and committed. The compiler is pinned
(nvidia-cutlass-dsl==4.8.1), so the numbers are reproducible. 144 kernels, about 6 s each.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("cutlass.cute", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")

from impls.attention.fa4.sm90 import variants as sm90
from impls.attention.fa4.sm100 import variants as sm100

# CuTe DSL compiles no torch code: CI runs them on the newest torch only (-m "not kernel_compile")
pytestmark = pytest.mark.kernel_compile

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"


def _table(path: Path, with_kernel: bool) -> dict[tuple[str, str], tuple[int, int, str]]:
    """(variant, kernel) -> (registers, shared memory bytes, "stores/loads") from a table."""
    rows = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or not re.fullmatch(r"(float16|bfloat16)-d\d+-\w+-\w+", cells[0]):
            continue
        name, kernel = cells[0], cells[1] if with_kernel else "fwd"
        regs, smem, spills = cells[2:5] if with_kernel else cells[1:4]
        rows[(name, kernel)] = (int(regs), int(smem), spills)
    return rows


SM90 = _table(RESULTS / "fa4-sm90-compile.md", with_kernel=True)
SM100 = _table(RESULTS / "fa4-sm100-compile.md", with_kernel=False)
CASES = ([("sm_90a", k, v.name) for v in sm90.VARIANTS for k in ("fwd", "bwd")]
         + [("sm_100a", "fwd", name) for name in sm100.VARIANTS])


def test_tables_list_every_variant():
    assert set(SM90) == {(n, k) for a, k, n in CASES if a == "sm_90a"}
    assert set(SM100) == {(n, k) for a, k, n in CASES if a == "sm_100a"}
    assert len(CASES) == 144


@pytest.mark.parametrize(("arch", "kernel", "name"), CASES,
                         ids=[f"{a}-{k}-{n}" for a, k, n in CASES])
def test_variant_compiles_with_recorded_resources(arch, kernel, name):
    if arch == "sm_90a":
        r, recorded = sm90.compile_variant(name, arch=arch, kernel=kernel), SM90[(name, kernel)]
    else:
        r, recorded = sm100.compile_variant(name, arch=arch), SM100[(name, kernel)]
    assert r["cubin_bytes"] > 10_000
    assert isinstance(r["registers"], int) and 0 < r["registers"] <= 255
    assert r["shared_memory_bytes"] <= 227 * 1024  # per-block opt-in limit, sm_90 and sm_100
    got = (r["registers"], r["shared_memory_bytes"], f"{r['spill_stores']}/{r['spill_loads']}")
    assert got == recorded, (f"{arch} {kernel} {name}: compiled {got}, the table records "
                             f"{recorded}; regenerate and commit the table if this is intended")
