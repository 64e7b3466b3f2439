"""Prove that a carried site imports the CuTe DSL and flash-attn-4's CuTe kernels with
nothing but that site, torch and what the GPU host already has.

    python3 -S -E -s ci/carry_import_check.py SITE TORCH_SITE [HOST_DIR ...]
    python3 ci/carry_import_check.py --compare BUNDLE_SITE SITE

Run with -S (no site-packages, no .pth files): SITE goes first on the path as Python's site
module would take it (its .pth files put nvidia-cutlass-dsl's ``cutlass`` on the path), then
TORCH_SITE (the folder holding torch) without its .pth files, so an installed ``cutlass``
there cannot answer. ``import torch`` first; then every module that ``import cutlass.cute``
and ``import flash_attn.cute`` load must come from SITE, the standard library, or a package
the GPU host has (HOST, from the device tool's package list); anything else is a package
the bundle lacks.

The bundle is built for the GPU host's CPython 3.12; a machine with another Python proves
the import on a twin SITE, the same distributions at the same versions installed for
itself. ``--compare`` shows that the twin stands for the bundle: the same distributions,
the same Python files (the SHA-256 in each RECORD), and every extension module of the
bundle built for CPython 3.12 (or for no particular Python).

HOST_DIRs stand in for host packages this machine lacks (einops, say): they go last on the
path, and only HOST's names may come from them. Exit 0 and one line per package when it
holds; 1 and what is missing; 4 on bad usage.
"""

from __future__ import annotations

import importlib
import site
import sys
import sysconfig
from pathlib import Path

TARGETS = ("cutlass.cute", "flash_attn.cute")
# import names of packages on the lent GPU host (docs of the device tool: cuda-bindings,
# cuda-core and cuda-pathfinder are ``cuda``; protobuf is ``google``)
HOST = frozenset({
    "torch", "torchgen", "functorch", "numpy", "cuda", "typing_extensions", "einops",
    "google", "packaging", "sympy", "mpmath", "networkx", "jinja2", "markupsafe", "filelock",
    "fsspec", "yaml", "triton", "ml_dtypes", "psutil", "scipy", "attr", "attrs", "requests",
    "urllib3", "idna", "certifi", "charset_normalizer", "tqdm", "pydantic", "rich",
    "pygments", "click", "setuptools", "pkg_resources", "_distutils_hack", "nvidia",
    "opt_einsum", "cloudpickle", "wrapt", "regex", "six", "dateutil", "tabulate",
    "colorama",
})


def _under(path: Path, roots: list[Path]) -> Path | None:
    return next((r for r in roots if r == path or r in path.parents), None)


def _records(site_dir: Path) -> dict[str, dict[str, str]]:
    """{distribution: {python file: its RECORD hash}}."""
    out = {}
    for info in sorted(site_dir.glob("*.dist-info")):
        rows = (line.split(",") for line in (info / "RECORD").read_text().splitlines())
        out[info.name] = {r[0]: r[1] for r in rows if len(r) >= 2 and r[0].endswith(".py")}
    return out


def _per_python(bundle: Path, twin: Path, name: str) -> bool:
    """A file that names its own Python's extension module (cutlass's version records list
    ``_cutlass_ir.cu13.cpython-312-...so`` and its hash): alike but for that."""
    texts = [(d / name).read_text(errors="replace") for d in (bundle, twin)
             if (d / name).is_file()]
    return len(texts) == 2 and all("cpython-3" in t for t in texts)


def compare(bundle: Path, twin: Path) -> int:
    problems = []
    a, b = _records(bundle), _records(twin)
    if set(a) != set(b):
        problems.append(f"distributions differ: bundle only {sorted(set(a) - set(b))}, "
                        f"twin only {sorted(set(b) - set(a))}")
    for dist in sorted(set(a) & set(b)):
        differ = [f for f in sorted(set(a[dist]) | set(b[dist]))
                  if a[dist].get(f) != b[dist].get(f) and not _per_python(bundle, twin, f)]
        if differ:
            problems.append(f"{dist}: {len(differ)} Python file(s) differ, e.g. {differ[0]}")
    for so in sorted(bundle.rglob("*.so")):
        tag = so.name.split(".")[-2] if so.name.count(".") >= 2 else ""
        if tag.startswith("cpython-") and not tag.startswith("cpython-312"):
            problems.append(f"{so.relative_to(bundle)} is built for {tag}, not CPython 3.12")
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    if not problems:
        files = sum(len(v) for v in a.values())
        print(f"the twin stands for the bundle: {len(a)} distributions, {files} Python files "
              "alike; extension modules for CPython 3.12")
    return 1 if problems else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--compare"] and len(argv) == 3:
        return compare(Path(argv[1]), Path(argv[2]))
    if len(argv) < 2 or argv[0].startswith("-"):
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 4
    carried, torch_site = Path(argv[0]).resolve(), Path(argv[1]).resolve()
    stand_ins = [str(Path(d).resolve()) for d in argv[2:]]
    before = set(sys.path)
    site.addsitedir(str(carried))
    added = [p for p in sys.path if p not in before]
    sys.path[:] = added + [p for p in sys.path if p not in added] + [str(torch_site), *stand_ins]
    stdlib = [Path(sysconfig.get_paths()[k]).resolve() for k in ("stdlib", "platstdlib")]
    import torch  # noqa: F401  (the host's)

    loaded = set(sys.modules)
    problems, origins = [], {}
    for name in TARGETS:
        try:
            importlib.import_module(name)
        except Exception as exc:  # the whole point: say why it does not import
            problems.append(f"import {name}: {type(exc).__name__}: {exc}".splitlines()[0])
    for name, mod in sorted(sys.modules.items()):
        if name in loaded or mod is None:
            continue
        file = getattr(mod, "__file__", None)
        if not file:
            continue
        path, top = Path(file).resolve(), name.split(".")[0]
        if _under(path, [carried]):
            origins.setdefault(top, "carried")
        elif _under(path, stdlib) and not _under(path, [torch_site]):
            continue
        elif top in HOST:
            origins.setdefault(top, "host")
        else:
            problems.append(f"{name} came from {path}: neither carried nor on the GPU host")
    for name in TARGETS:  # the carried copy, not one installed beside torch
        if name not in sys.modules:
            continue
        file = getattr(sys.modules[name], "__file__", None)
        if file is None:  # folders without __init__.py import as an empty namespace
            problems.append(f"{name} is an empty namespace package (its package is missing; "
                            "for cutlass.cute: nvidia-cutlass-dsl-libs-core)")
        elif not _under(Path(file).resolve(), [carried]):
            problems.append(f"{name} was imported from {file}, not from {carried}")
    for top, where in sorted(origins.items()):
        print(f"{top}: {where}")
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    if not problems:
        print(f"imports {', '.join(TARGETS)} from {carried} with torch beside it")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
