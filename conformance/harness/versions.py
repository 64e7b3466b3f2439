"""Installed package versions and PEP 440 version gates for matrix entries.

A matrix entry may carry ``versions: {torch: "<2.13", numpy: ">=2.4"}``: it then applies
only where every named distribution is installed at a version the specifier admits (all
must hold). Pre-releases and nightlies count as what they are (``2.13.0.dev20261101`` is not
``< 2.13`` by PEP 440's rule for exclusive comparisons), local labels (``+cu130``) are
ignored, as PEP 440 says.

The matrix also names the releases its entries were measured on (``measured: {cpu:
{torch: [2.11.0, ...]}}``, from ci/release-matrix.sh). An entry's measured releases are those
its gate admits; on a release newer than all of them the entry is unmeasured
(``beyond_measured``), so a strict expected failure that passes there is a likely fix
("fixed in 2.15.0?"), reported with the gate to narrow it to (``narrowed``).
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Mapping

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from conformance.harness.errors import ConfigError


@functools.cache
def installed_version(dist: str) -> str | None:
    """The installed version of a distribution, or None if it is not installed.

    torch is read from ``torch.__version__`` (a source build may lack metadata)."""
    if canonicalize_name(dist) == "torch":
        import torch

        return str(torch.__version__)
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def parse_gate(where: str, gate: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Validate ``{dist: specifier}``; ConfigError (one line, naming ``where``) if bad."""
    out = []
    for dist, spec in gate.items():
        try:
            SpecifierSet(spec)
        except InvalidSpecifier:
            raise ConfigError(
                f"{where}.{dist}: {spec!r} is not a PEP 440 version specifier "
                f"(e.g. '<2.13', '>=2.11,<2.13', '==3.6.*')") from None
        out.append((canonicalize_name(dist), spec))
    return tuple(sorted(out))


def gate_holds(gate: tuple[tuple[str, str], ...]) -> tuple[bool, str]:
    """(True, "") if every specifier admits the installed version, else (False, why)."""
    for dist, spec in gate:
        version = installed_version(dist)
        if version is None:
            return False, f"{dist} is not installed (entry needs {dist}{spec})"
        try:
            ok = SpecifierSet(spec).contains(Version(version), prereleases=True)
        except InvalidVersion:
            return False, f"{dist} {version} is not a PEP 440 version"
        if not ok:
            return False, f"{dist} {version} is outside {spec}"
    return True, ""


def describe(gate: tuple[tuple[str, str], ...]) -> str:
    """``torch<2.13, numpy>=2.4`` (empty for no gate)."""
    return ", ".join(f"{dist}{spec}" for dist, spec in gate)


def measured_admitted(gate: tuple[tuple[str, str], ...], dist: str,
                      releases: tuple[str, ...]) -> tuple[str, ...]:
    """The measured releases of ``dist`` that the gate admits (all of them if the gate
    does not name ``dist``), oldest first."""
    specs = [spec for d, spec in gate if d == canonicalize_name(dist)]
    out = [r for r in releases
           if all(SpecifierSet(s).contains(Version(r), prereleases=True) for s in specs)]
    return tuple(sorted(out, key=Version))


def beyond_measured(gate: tuple[tuple[str, str], ...],
                    measured: Mapping[str, tuple[str, ...]]) -> tuple[str, str, str] | None:
    """(dist, installed, newest measured) when the installed version of a measured
    distribution is newer than every measured release the gate admits; else None (also
    when nothing was measured: an entry never measured has no range to be outside of)."""
    for dist, releases in sorted(measured.items()):
        admitted = measured_admitted(gate, dist, releases)
        version = installed_version(dist)
        if not admitted or version is None:
            continue
        try:
            installed = Version(Version(version).base_version)
        except InvalidVersion:
            continue
        if installed > Version(admitted[-1]):
            return canonicalize_name(dist), version, admitted[-1]
    return None


def narrowed(gate: tuple[tuple[str, str], ...], dist: str, fixed: str, newest: str) -> str:
    """The specifier that keeps the gate's releases up to ``newest`` and leaves out the
    release ``fixed`` (and later): ``>=2.11`` with 2.15.0 after 2.14.1 -> ``>=2.11,<2.15``;
    a later patch of the same minor (2.14.2 after 2.14.1) -> ``<2.14.2``."""
    f, n = Version(Version(fixed).base_version), Version(newest)
    bound = f"<{f.major}.{f.minor}" if (f.major, f.minor) != (n.major, n.minor) else f"<{f}"
    specs = [spec for d, spec in gate if d == canonicalize_name(dist)]
    return ",".join([*specs, bound])
