"""``torch-conformance bundle OUTDIR``: a wheelhouse for a lab with no internet.

It holds the suite's wheel (built from this checkout) and every dependency, for a given
platform and Python; torch is left out unless asked (``--torch``): labs bring their own
build. Install on the offline machine (torch already there)::

    pip install --no-index --find-links OUTDIR torch-conformance

Downloads go through pip (``pip wheel`` for the suite, ``pip download`` for the rest), so
pip's own configuration (index, proxies, certificates) applies on the machine that builds
the bundle.
"""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

DIST = "torch-conformance"


class BundleError(RuntimeError):
    """A bundle that cannot be built (printed as one line)."""


def source_root() -> Path:
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        raise BundleError("bundle builds the suite's wheel from its source checkout; this "
                          f"install ({root}) has none: run it from a clone (pip install -e .)")
    return root


def requirements(extras: list[str], with_torch: bool, python: str | None) -> list[str]:
    """The suite's requirements for these extras (markers evaluated for ``python``)."""
    env = default_environment()
    if python:
        env["python_version"] = python
        env["python_full_version"] = f"{python}.0"
    known = set(metadata.metadata(DIST).get_all("Provides-Extra") or ())
    unknown = sorted(set(extras) - known)
    if unknown:
        raise BundleError(f"unknown extra {', '.join(unknown)} (known: "
                          f"{', '.join(sorted(known))})")
    out = []
    for text in metadata.requires(DIST) or ():
        req = Requirement(text)
        if req.marker is not None and not any(
                req.marker.evaluate({**env, "extra": e}) for e in ("", *extras)):
            continue
        if req.name == "torch" and not with_torch:
            continue
        req.marker = None
        out.append(str(req))
    if with_torch:
        import torch

        out = [r for r in out if Requirement(r).name != "torch"]
        out.append(f"torch=={torch.__version__.split('+')[0]}")
    return sorted(set(out))


def _pip(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        raise BundleError(f"pip {args[0]} failed: {last}")


def build(out: Path, *, extras: list[str], with_torch: bool, python: str | None,
          platform: str | None) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    reqs = requirements(extras, with_torch, python)
    _pip("wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(source_root()))
    target: list[str] = []
    if python or platform:  # another machine's wheels: binary only, as pip requires
        target = ["--only-binary=:all:"]
        target += ["--python-version", python] if python else []
        target += ["--platform", platform] if platform else []
    _pip("download", "--quiet", "--dest", str(out), *target, *reqs)
    (out / "requirements.txt").write_text("\n".join(reqs) + "\n", encoding="utf-8")
    (out / "INSTALL.txt").write_text(
        "Offline install (torch already installed" + (", or from this folder" if with_torch
                                                     else "") + "):\n\n"
        f"    pip install --no-index --find-links {out.name} {DIST}"
        + (f"[{','.join(extras)}]" if extras else "") + "\n", encoding="utf-8")
    return reqs
