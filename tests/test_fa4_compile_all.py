"""Every variant of our FA4-style CuTe DSL kernels compiles on this CPU machine (sm90 forward
and backward for sm_90a; sm100 forward, with its schedules and shapes, and backward for
sm_100a), and its registers, shared memory and spills are those of the committed tables
(docs/results/fa4-sm90-compile.md, fa4-sm100-compile.md, fa4-sm100-bwd-compile.md). A
variant that stops compiling fails here; a change in resources fails until the table is
regenerated (``python -m impls.attention.fa4.sm90.variants --table``, ``... .sm100.variants
--table [--kernel bwd]``) and committed. The compiler is pinned (nvidia-cutlass-dsl==4.8.1),
so the numbers are reproducible.

What compiles: every variant whose compile is cached (a cache read), and, cold, a covering
subset: for each architecture and kernel, every option of a variant's name (dtype, head dim,
mask, score modifier, sm100 schedule) in at least one variant (45 of 320 compiles, about
2 CPU-minutes instead of 30 on this project's machines). ``CONFORMANCE_COMPILE_ALL=1``
compiles every variant: run it after editing a kernel (docs/guides/ci.md, "Kernel
compiles"); without it the others skip saying so.

Compiles go through impls/attention/fa4/compile_cache.py: a result is reused only for the
same kernel sources (every file the kernels are built from), variant, kind, arch and
compiler version, so an unchanged tree compiles nothing twice on one machine and any edit
to a kernel recompiles every variant (about 6 s each on 2 cores, cold).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

pytest.importorskip("cutlass.cute", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")

from impls.attention.fa4.compile_cache import cached_compile, is_cached
from impls.attention.fa4.sm90 import variants as sm90
from impls.attention.fa4.sm100 import variants as sm100

# CuTe DSL compiles no torch code: CI runs them on the newest torch only (-m "not kernel_compile")
pytestmark = pytest.mark.kernel_compile

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
NAME = re.compile(r"(float16|bfloat16)-d\d+(v\d+)?(-\w+)+")


def _table(path: Path, kernel: str | None) -> dict[tuple[str, str], tuple[int, int, str]]:
    """(variant, kernel) -> (registers, shared memory bytes, "stores/loads") from a table;
    ``kernel`` None: the table has a kernel column, else every row is that kernel's."""
    rows = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or not NAME.fullmatch(cells[0]):
            continue
        name, kind = cells[0], cells[1] if kernel is None else kernel
        regs, smem, spills = cells[2:5] if kernel is None else cells[1:4]
        rows[(name, kind)] = (int(regs), int(smem), spills)
    return rows


TABLES = {"sm_90a": _table(RESULTS / "fa4-sm90-compile.md", None),
          "sm_100a": {**_table(RESULTS / "fa4-sm100-compile.md", "fwd"),
                      **_table(RESULTS / "fa4-sm100-bwd-compile.md", "bwd")}}
CASES = ([("sm_90a", k, v.name) for v in sm90.VARIANTS for k in ("fwd", "bwd")]
         + [("sm_100a", "fwd", name) for name in sm100.VARIANTS]
         + [("sm_100a", "bwd", name) for name in sm100.BWD_VARIANTS])


def test_tables_list_every_variant():
    for arch, table in TABLES.items():
        assert set(table) == {(n, k) for a, k, n in CASES if a == arch}, arch
    # sm90: 72 variants x fwd/bwd; sm100: 120 forward (48 + 72 schedules and shapes), backward
    assert len(CASES) == 144 + 120 + len(sm100.BWD_VARIANTS)


COMPILE_ALL_ENV = "CONFORMANCE_COMPILE_ALL"


def covering(names: list[str]) -> list[str]:
    """The names, in order, that add an option not seen before (an option: a dash-separated
    field of a variant's name at its position): every option at least once."""
    seen: set[tuple[int, str]] = set()
    out = []
    for name in names:
        options = set(enumerate(name.split("-")))
        if options - seen:
            out.append(name)
            seen |= options
    return out


COVERING = {(a, k): set(covering([n for aa, kk, n in CASES if (aa, kk) == (a, k)]))
            for a, k, _ in CASES}


def test_covering_subset_has_every_option():
    for (arch, kernel), subset in COVERING.items():
        names = [n for a, k, n in CASES if (a, k) == (arch, kernel)]
        assert set(subset) < set(names), (arch, kernel)
        assert {o for n in subset for o in enumerate(n.split("-"))} == \
            {o for n in names for o in enumerate(n.split("-"))}, (arch, kernel)
    assert sum(len(s) for s in COVERING.values()) == 45


def _compile(arch: str, kernel: str, name: str) -> dict:
    if arch == "sm_90a":
        return sm90.compile_variant(name, arch=arch, kernel=kernel)
    return sm100.compile_variant(name, arch=arch, kernel=kernel)


@pytest.mark.parametrize(("arch", "kernel", "name"), CASES,
                         ids=[f"{a}-{k}-{n}" for a, k, n in CASES])
def test_variant_compiles_with_recorded_resources(arch, kernel, name):
    if not (os.environ.get(COMPILE_ALL_ENV) == "1" or name in COVERING[(arch, kernel)]
            or is_cached(arch, kernel, name)):
        pytest.skip(f"not compiled cold: outside the covering subset ({COMPILE_ALL_ENV}=1 "
                    "compiles every variant)")
    r = cached_compile(arch, kernel, name, lambda: _compile(arch, kernel, name))
    recorded = TABLES[arch][(name, kernel)]
    assert r["cubin_bytes"] > 10_000
    assert isinstance(r["registers"], int) and 0 < r["registers"] <= 255
    assert r["shared_memory_bytes"] <= 227 * 1024  # per-block opt-in limit, sm_90 and sm_100
    got = (r["registers"], r["shared_memory_bytes"], f"{r['spill_stores']}/{r['spill_loads']}")
    cached = " (a cached compile of these exact sources)" if r.get("cached") else ""
    assert got == recorded, (f"{arch} {kernel} {name}: compiled {got}{cached}, the table "
                             f"records {recorded}; regenerate and commit the table if this "
                             "is intended")
