"""Installed package versions and PEP 440 version gates for matrix entries.

A matrix entry may carry ``versions: {torch: "<2.13", numpy: ">=2.4"}``: it then applies
only where every named distribution is installed at a version the specifier admits (all
must hold). Pre-releases and nightlies count as what they are (``2.13.0.dev20261101`` is not
``< 2.13`` by PEP 440's rule for exclusive comparisons), local labels (``+cu130``) are
ignored, as PEP 440 says.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Mapping

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from conformance.errors import ConfigError


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
