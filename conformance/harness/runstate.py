"""Everything decided once per run: device, matrix, implementations, profile, seed."""

from __future__ import annotations

import hashlib
import random
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conformance.harness.errors import ConfigError
from conformance.harness.matrix import DEFAULT_MATRIX, Matrix, load_matrix
from conformance.harness.probe import DeviceInfo, resolve_device, xdist_workers
from conformance.harness.registry import Registry, build_registry

PROFILES = ("ci", "dev", "thorough")
# --stale-entries: a pass where a strict expected failure names a known bug (report: passed,
# "bug not present in this build"; fail: a failure within the releases the entry was measured on)
STALE_ENTRIES = ("report", "fail")


@dataclass
class RunState:
    device: DeviceInfo
    matrix: Matrix
    registry: Registry
    profile: str
    seed: int
    impl_options: list[str]
    matrix_option: str | None
    include_builtins: bool
    report_dir: Path | None
    command: str
    emulated: bool = False
    shard: dict[str, Any] | None = None
    repro_dir: Path | None = None
    allow_partial: bool = False
    strict: bool = False  # pytest's --strict: the device's must-pass list must all pass
    stale_entries: str = "report"  # a pass under a strict expected failure: report or fail
    stop_impl: bool = False  # --stop-impl-after-failure: an implementation's later tests skip

    @classmethod
    def from_options(cls, opt: Any, seed_from_controller: int | None = None) -> RunState:
        profile = opt.conformance_profile
        if profile not in PROFILES:
            raise ConfigError(f"--profile: unknown profile {profile!r} "
                              f"(expected one of: {', '.join(PROFILES)})")
        matrix = load_matrix(opt.device_matrix)
        device = resolve_device(opt.device, xdist_workers(opt))
        impl_options = list(opt.conformance_impl or [])
        registry = build_registry(
            {name: area.builtins for name, area in matrix.areas.items()},
            impl_options,
            include_builtins=not opt.no_builtins,
            vocabularies={name: area.vocabulary for name, area in matrix.areas.items()},
        )
        for rule in matrix.rules_of("unsupported"):
            if rule.is_capability_rule and rule.selects_device(device.matrix_key, device.tags):
                for area in sorted(rule.areas):
                    registry.restrict(area, rule.matches_impl, rule.features, rule.dtypes,
                                      f"matrix {rule.label}: {rule.reason}")
        seed = opt.conformance_seed
        if seed is None:
            seed = seed_from_controller
        if seed is None:
            seed = 0 if profile == "ci" else random.SystemRandom().randrange(2**31)
        # absolute: an implementation that changes the working directory moves nothing
        report_dir = Path(opt.conformance_report).resolve() if opt.conformance_report else None
        return cls(
            device=device,
            matrix=matrix,
            registry=registry,
            profile=profile,
            seed=int(seed),
            impl_options=impl_options,
            matrix_option=opt.device_matrix,
            include_builtins=not opt.no_builtins,
            report_dir=report_dir,
            command=shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            emulated=bool(getattr(opt, "conformance_emulated", False)),
            repro_dir=(Path(opt.conformance_repro_dir).resolve()
                       if getattr(opt, "conformance_repro_dir", None) else None),
            allow_partial=bool(getattr(opt, "conformance_allow_partial", False)),
            strict=_strict(opt, matrix, device),
            stale_entries=getattr(opt, "conformance_stale_entries", None) or "report",
            stop_impl=bool(getattr(opt, "conformance_stop_impl", False)),
        )

    def repro_args(self, impl_spec: str | None = None, impl_area: str | None = None) -> list[str]:
        """Options that reproduce one test exactly (device with its index, matrix, profile,
        seed, impl)."""
        args = [f"--device={self.device.torch_device}", f"--profile={self.profile}",
                f"--seed={self.seed}"]
        if self.matrix_option and Path(self.matrix_option).resolve() != DEFAULT_MATRIX.resolve():
            args.append(f"--device-matrix={self.matrix_option}")
        for text in self.impl_options:
            if impl_spec is None or text.split("=", 1)[-1].strip() == impl_spec:
                args.append(f"--impl={text}")
        if not self.include_builtins:
            args.append("--no-builtins")
        if self.emulated:
            args.append("--emulated")
        return args

    def matrix_entries(self) -> list[dict[str, Any]]:
        """Every matrix entry, whether it applies to this run and, if not, why not."""
        out = []
        for rule in self.matrix.rules:
            why = rule.why_not(self.device.matrix_key, self.device.tags)
            if why is None and rule.kind == "budget" and self.profile not in rule.profiles:
                why = f"the {self.profile} profile runs these cases"
            key = self.device.matrix_key
            beyond = self.matrix.beyond_measured(rule, key)
            out.append({"entry": rule.label, "area": rule.area, "versions": rule.gate or None,
                        "applies": why is None, "why_not": why, "reason": rule.reason,
                        "link": rule.link,
                        "expect": rule.expect.describe() if rule.expect else None,
                        "measured": {d: list(r) for d, r in
                                     self.matrix.measured_of(rule, key).items() if r},
                        "beyond_measured": (f"{beyond[0]} {beyond[1]} is newer than "
                                            f"{beyond[2]}" if beyond else None)})
        return out

    def must_pass_areas(self) -> list[str] | None:
        """The areas of this device's must-pass list it runs (None: the matrix gives none)."""
        spec = self.matrix.devices.get(self.device.matrix_key)
        if spec is None or spec.must_pass is None:
            return None
        return sorted(spec.must_pass.areas & spec.areas)

    def run_info(self) -> dict[str, Any]:
        return {
            "matrix_entries": self.matrix_entries(),
            "command": self.command,
            "profile": self.profile,
            "seed": self.seed,
            "emulated": self.emulated,
            "matrix": str(self.matrix.path),
            "matrix_sha256": hashlib.sha256(self.matrix.path.read_bytes()).hexdigest(),
            "shard": self.shard,
            "allow_partial": self.allow_partial,
            "strict": self.strict,
            "stale_entries": self.stale_entries,
            "stop_impl_after_failure": self.stop_impl,
            "newer_than_measured": self.matrix.newer_than_measured(self.device.matrix_key),
            "must_pass_areas": self.must_pass_areas(),
            "impl_options": self.impl_options,
            "implementations": [
                {"area": i.area, "name": i.name, "spec": i.spec, "origin": i.origin,
                 "wraps": i.wraps[1] if i.wraps else None,
                 "dtypes": sorted(i.caps.dtypes) if i.caps.dtypes is not None else "all",
                 "devices": sorted(i.caps.devices) if i.caps.devices is not None else "all",
                 "features": sorted(i.caps.features) if i.caps.features is not None else "all",
                 "limits": i.caps.limits, "requires": sorted(i.caps.requires),
                 "removed_by_matrix": {**i.caps.excluded_features, **i.caps.excluded_dtypes}}
                for i in self.registry.all()
            ],
        }


def _strict(opt: Any, matrix: Matrix, device: DeviceInfo) -> bool:
    """pytest's own ``--strict`` (its strict markers, config and xfails) also asks for the
    device's must-pass list; a device the matrix gives none is a usage error."""
    if not getattr(opt, "strict", False):
        return False
    spec = matrix.devices.get(device.matrix_key)
    if spec is None or spec.must_pass is None:
        raise ConfigError(f"--strict: the device matrix {matrix.path} gives device "
                          f"{device.matrix_key!r} no must_pass list")
    return True


# test id -> metadata of every must-pass test collected (before -k / -m deselection)
MUST_PASS = pytest.StashKey[dict]()


def left_out_by_profile(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests an area's profile plan deselects: off the must-pass list, as a budget entry's."""
    required = config.stash.get(MUST_PASS, {})
    for item in items:
        required.pop(item.nodeid, None)


def deselect_by_profile(config: pytest.Config, items: list[pytest.Item],
                        planned: Callable[[pytest.Item], bool]) -> int:
    """Deselect the items an area's profile plan leaves out (``planned`` false): reported
    as deselected and off the must-pass list; how many."""
    keep, drop = [], []
    for item in items:
        (keep if planned(item) else drop).append(item)
    if not drop:
        return 0
    items[:] = keep
    config.hook.pytest_deselected(items=drop)
    left_out_by_profile(config, drop)
    return len(drop)


class ProfilePlan:
    """An area's profile plan: ``planned(item, profile)`` says which of its tests a profile
    runs; ``deselect`` (its conftest's pytest_collection_modifyitems) leaves the others out,
    ``header`` (its pytest_report_collectionfinish) says how many and where the plan is."""

    def __init__(self, area: str, what: str, where: str,
                 planned: Callable[[pytest.Item, str], bool]) -> None:
        self.area, self.what, self.where, self.planned = area, what, where, planned
        self.key = pytest.StashKey[int]()

    def deselect(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        profile = config.stash[STATE].profile
        config.stash[self.key] = deselect_by_profile(
            config, items, lambda item: self.planned(item, profile))

    def header(self, config: pytest.Config) -> list[str]:
        left = config.stash.get(self.key, 0)
        if not left:
            return []
        return [f"torch-conformance {self.area}: {left} {self.what} left out by the "
                f"{config.stash[STATE].profile} profile ({self.where})"]


# the session's RunState (``config.stash[STATE]``; areas read it in pytest_generate_tests)
STATE = pytest.StashKey[RunState]()
