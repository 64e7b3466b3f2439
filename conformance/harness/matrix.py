"""Load and validate ``device_matrix.yaml``; answer which rules apply to a test.

The structure is checked by the JSON schema in ``schemas/device_matrix.schema.json``;
the few cross-references a schema cannot express (a device naming an unknown area) are
checked here with the same one-line message style.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import re
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from conformance.harness.errors import ConfigError
from conformance.harness.expectations import Expectation
from conformance.harness.versions import (
    beyond_measured,
    describe,
    gate_holds,
    measured_admitted,
    parse_gate,
)
from conformance.harness.vocabulary import Vocabulary

DEFAULT_MATRIX = Path(__file__).resolve().parents[1] / "device_matrix.yaml"
SCHEMA_VERSION = 1


def load_schema() -> dict[str, Any]:
    text = resources.files("conformance.harness").joinpath("schemas/device_matrix.schema.json")
    return json.loads(text.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class AreaSpec:
    name: str
    description: str
    dtypes: tuple[str, ...]
    builtins: tuple[str, ...]
    features: frozenset[str] = frozenset()
    limits: frozenset[str] = frozenset()
    timeout_s: float | None = None  # the per-test watchdog under the ci profile

    @property
    def vocabulary(self) -> Vocabulary:
        return Vocabulary(self.name, self.features, self.limits, self.dtypes)


@dataclass(frozen=True)
class MustPass:
    """A device's must-pass list (``--strict``): the areas whose shipped implementations'
    tests must pass, less the exceptions (test-id patterns, each with its reason)."""

    areas: frozenset[str]
    impls: tuple[str, ...] = ()  # shipped implementation names (wildcards); () is all
    excepted: tuple[tuple[tuple[str, ...], str], ...] = ()

    def why_not(self, nodeid: str, area: str, impl: Any) -> str | None:
        """Why the test is not on the list (None if it is): a test of a shipped
        implementation (or of the device itself), in a listed area, not excepted."""
        if area not in self.areas:
            return f"area {area} is not on the list"
        if impl is not None:
            if impl.origin != "builtin":
                return f"implementation {impl.name} is not a shipped one"
            if self.impls and not any(fnmatch.fnmatchcase(impl.name, p) for p in self.impls):
                return f"implementation {impl.name} is not on the list"
        for patterns, reason in self.excepted:
            if matches_any(nodeid, patterns):
                return reason
        return None


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    dtypes: frozenset[str]
    areas: frozenset[str]
    description: str = ""
    after_error: str = "keeps_working"  # or "poisoned"
    isolate_errors: bool = True  # run error cases in a child process
    toolchain: dict[str, Any] = field(default_factory=dict)  # required build facts
    must_pass: MustPass | None = None  # what --strict requires here


def _literal_brackets(pattern: str) -> str:
    """Test ids contain [...]: in matrix patterns brackets are literal, only * and ? match."""
    return "".join({"[": "[[]", "]": "[]]"}.get(c, c) for c in pattern)


@functools.cache
def _id_regex(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """One compiled regex for "any of ``patterns`` matches" (brackets literal); None for
    no patterns. Collection asks every entry about every test id (about 700,000 times for
    the whole suite): translating the patterns once per entry, not per question, is what
    keeps that within a second."""
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(_literal_brackets(p))})"
                               for p in patterns))


def matches_any(text: str, patterns: tuple[str, ...]) -> bool:
    """Whether a matrix pattern (``*`` and ``?`` wildcards, brackets literal) matches."""
    rx = _id_regex(tuple(patterns))
    return rx is not None and rx.match(text) is not None


@dataclass(frozen=True)
class Rule:
    """One tolerance / expected-failure / unsupported entry."""

    kind: str  # "tolerance" | "expected_failure" | "unsupported" | "budget"
    index: int
    area: str  # as written: an area, or a family "prefix.*"
    patterns: tuple[str, ...]
    reason: str
    devices: frozenset[str] | None = None
    when: frozenset[str] = frozenset()
    unless: frozenset[str] = frozenset()
    link: str | None = None
    factor: float = 1.0
    strict: bool = True
    impls: tuple[str, ...] = ()  # whose bug: implementation names / module:attr (wildcards)
    features: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    versions: tuple[tuple[str, str], ...] = ()  # ((distribution, PEP 440 specifier), ...)
    excepted: tuple[str, ...] = ()  # "except": test ids matched by these are left out
    expect: Expectation | None = None  # expected failures: the failure that must happen
    profiles: frozenset[str] = frozenset()  # budget entries: the profiles that leave it out
    areas: frozenset[str] = frozenset()  # the areas ``area`` names (a family expanded at load)

    def covers(self, area: str) -> bool:
        """The entry is about this area (named, or one of the family it names)."""
        return area in self.areas if self.areas else area == self.area

    @property
    def is_capability_rule(self) -> bool:
        """An unsupported entry that removes features/dtypes from implementations."""
        return self.kind == "unsupported" and bool(self.impls) and not self.patterns

    def matches_impl(self, impl: Any) -> bool:
        """Whose bug the entry is: it applies to the implementations it names and, naming
        none, to the shipped ones. A name matches a shipped implementation (or one that
        declares it wraps one, ``conformance_wraps``); ``module:attr`` matches any, so an
        implementation plugged in with ``--impl`` is touched only by an entry naming its spec,
        whatever name it gives itself. ``impl`` None (a test of the device itself) matches."""
        if impl is None:
            return True
        shipped = impl.shipped_as
        if not self.impls:
            return shipped is not None
        names = (impl.spec, *(shipped or ()))
        return any(matches_any(n, self.impls) for n in names)

    def selects_device(self, device: str, tags: frozenset[str]) -> bool:
        """Device, capability tags and package versions all select this run."""
        return self.why_not(device, tags) is None

    def why_not(self, device: str, tags: frozenset[str]) -> str | None:
        """Why the entry does not apply to this run (None if it does)."""
        if self.devices is not None and device not in self.devices:
            return f"device {device} is not in {sorted(self.devices)}"
        if not self.when <= tags:
            return f"tags {sorted(self.when - tags)} are absent"
        if self.unless & tags:
            return f"tags {sorted(self.unless & tags)} are present"
        holds, why = gate_holds(self.versions)
        return None if holds else why

    @property
    def gate(self) -> str:
        return describe(self.versions)

    @property
    def label(self) -> str:
        section = {"tolerance": "tolerances", "expected_failure": "expected_failures"}
        return f"{section.get(self.kind, self.kind)}[{self.index}]"

    def matches_id(self, nodeid: str) -> bool:
        return matches_any(nodeid, self.patterns) and not matches_any(nodeid, self.excepted)

    def applies(self, nodeid: str, area: str, device: str, tags: frozenset[str],
                impl: Any = None) -> bool:
        if not self.covers(area) or not self.patterns:
            return False
        if not self.matches_id(nodeid):
            shipped = as_shipped(nodeid, impl)
            if shipped is None or not self.matches_id(shipped):
                return False
        return self.matches_impl(impl) and self.selects_device(device, tags)


def as_shipped(nodeid: str, impl: Any) -> str | None:
    """A declared wrapper's test id as the implementation it wraps would have it: its name
    among the id's parameters replaced by the wrapped one's (an entry that names the
    shipped implementation in its ``match``, ``*::test_x[torch.special.erfcx-*]``, then
    applies to the wrapper too, as the plug-in contract says); None for any other."""
    wraps = getattr(impl, "wraps", None) if impl is not None else None
    if not wraps or impl.origin == "builtin" or "[" not in nodeid:
        return None
    head, params = nodeid.split("[", 1)
    token = re.compile(rf"(^|-){re.escape(impl.name)}(?=-|\]$)")
    replaced, count = token.subn(lambda m: m.group(1) + wraps[0], params, count=1)
    return f"{head}[{replaced}" if count else None


@dataclass(frozen=True)
class Matrix:
    path: Path
    areas: dict[str, AreaSpec]
    devices: dict[str, DeviceSpec]
    rules: tuple[Rule, ...] = field(default_factory=tuple)
    # device -> distribution -> the releases the entries were measured on (oldest first)
    measured: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)

    def measured_of(self, rule: Rule, device: str) -> dict[str, tuple[str, ...]]:
        """Per distribution, the measured releases on this device that the rule admits."""
        return {dist: measured_admitted(rule.versions, dist, releases)
                for dist, releases in self.measured.get(device, {}).items()}

    def newer_than_measured(self, device: str) -> str | None:
        """One line when this run's release is newer than every release the matrix was
        measured on (on this device): its failures may be the release's own regressions,
        which no entry can know yet (docs/guides/versions.md, triage); else None."""
        beyond = beyond_measured((), self.measured.get(device, {}))
        if beyond is None:
            return None
        dist, installed, newest = beyond
        return (f"{dist} {installed} is newer than the releases this suite version has "
                f"measured (newest {newest}): failures may be new regressions of {dist} "
                f"{installed.split('+')[0]}; triage: docs/guides/versions.md#a-newer-torch")

    def beyond_measured(self, rule: Rule, device: str) -> tuple[str, str, str] | None:
        """(dist, installed, newest measured) when this run's release is newer than every
        release the rule was measured on (on this device), else None."""
        return beyond_measured(rule.versions, self.measured.get(device, {}))

    def rules_of(self, kind: str) -> tuple[Rule, ...]:
        return self._by_kind.get(kind, ())

    @functools.cached_property
    def _by_kind(self) -> dict[str, tuple[Rule, ...]]:
        kinds: dict[str, list[Rule]] = {}
        for rule in self.rules:
            kinds.setdefault(rule.kind, []).append(rule)
        return {kind: tuple(rules) for kind, rules in kinds.items()}

    def applicable(
        self, kind: str, nodeid: str, area: str, device: str, tags: frozenset[str],
        impl: Any = None,
    ) -> list[Rule]:
        """The ``kind`` entries that apply to a test (of implementation ``impl``, an Impl)."""
        return [r for r in self._of_area(kind, area)
                if r.applies(nodeid, area, device, tags, impl)]

    @functools.cached_property
    def _area_rules(self) -> dict[tuple[str, str], tuple[Rule, ...]]:
        return {}  # (kind, area) -> its entries, filled by _of_area

    def _of_area(self, kind: str, area: str) -> tuple[Rule, ...]:
        """The ``kind`` entries about ``area`` (collection asks per test; kept per area)."""
        if (kind, area) not in self._area_rules:
            self._area_rules[kind, area] = tuple(r for r in self.rules_of(kind)
                                                 if r.covers(area))
        return self._area_rules[kind, area]


class _DuplicateKey(yaml.MarkedYAMLError):
    """A mapping gives the same key twice (YAML would silently keep the last)."""


# libyaml's parser where PyYAML has it (ten times faster on the matrix: every process of a
# run loads it, xdist workers, rank pools and isolated children included); the same
# SafeConstructor either way
_SafeBase: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SafeBase):  # type: ignore[misc, valid-type]
    """A safe loader that refuses duplicate mapping keys (still no Python tags)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: let SafeLoader report it
                break
            if first is not None:
                raise _DuplicateKey(
                    problem=f"duplicate key {key!r} (first given on line {first.line + 1})",
                    problem_mark=key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _key_path(path: Any) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _schema_error(path: Path, data: Any) -> str | None:
    validator_cls = jsonschema.validators.validator_for(load_schema())
    validator = validator_cls(load_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is None:
        return None
    # For oneOf/anyOf, the deepest context error usually names the real problem.
    while error.context:
        error = jsonschema.exceptions.best_match(error.context)
    message = " ".join(error.message.split())
    if len(message) > 200:
        message = message[:197] + "..."
    return f"{path}: {_key_path(error.absolute_path)}: {message}"


def _as_tuple(value: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _rules(path: Path, data: dict[str, Any]) -> tuple[Rule, ...]:
    out: list[Rule] = []
    for key, kind in (
        ("tolerances", "tolerance"),
        ("expected_failures", "expected_failure"),
        ("unsupported", "unsupported"),
        ("budget", "budget"),
    ):
        for i, entry in enumerate(data.get(key) or []):
            match = entry.get("match", ())
            where = f"{path}: {key}[{i}]"
            versions = parse_gate(f"{where}.versions", entry.get("versions") or {})
            expect = entry.get("expect")
            out.append(
                Rule(
                    kind=kind,
                    index=i,
                    area=entry["area"],
                    patterns=(match,) if isinstance(match, str) else tuple(match),
                    excepted=_as_tuple(entry.get("except", ())),
                    reason=entry["reason"],
                    devices=frozenset(entry["devices"]) if "devices" in entry else None,
                    when=frozenset(entry.get("when", ())),
                    unless=frozenset(entry.get("unless", ())),
                    link=entry.get("link"),
                    factor=float(entry.get("factor", 1.0)),
                    strict=bool(entry.get("strict", True)),
                    impls=tuple(entry.get("impls", ())),
                    features=tuple(entry.get("features", ())),
                    dtypes=tuple(entry.get("dtypes", ())),
                    versions=versions,
                    expect=Expectation.parse(f"{where}.expect", expect) if expect else None,
                    profiles=frozenset(entry.get("profiles", ())),
                )
            )
    return tuple(out)


def _expand_areas(path: Path, where: str, names: list[str],
                  areas: dict[str, AreaSpec], single: bool = False) -> frozenset[str]:
    """Area names and families ('prefix.*') as the set of area names; ``family_ok``: a
    single name, reported as ``where.area``."""
    listed: set[str] = set()
    for i, area in enumerate(names):
        family = [a for a in areas if a.startswith(area[:-1])] if area.endswith(".*") \
            else [area] if area in areas else []
        if not family:
            at = f"{where}.area" if single else f"{where}[{i}]"
            raise ConfigError(
                f"{path}: {at}: unknown area {area!r} "
                f"(expected one of: {', '.join(sorted(areas))}, or a family 'prefix.*')"
            )
        listed.update(family)
    return frozenset(listed)


def load_matrix(path: str | Path | None = None) -> Matrix:
    """Read, validate and return the matrix; raise ConfigError with a one-line message."""
    path = Path(path) if path is not None else DEFAULT_MATRIX
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the device matrix ({exc.strerror})") from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader: no Python tags
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if isinstance(exc, _DuplicateKey):
            raise ConfigError(f"{path}: {where}{problem}") from None
        raise ConfigError(f"{path}: {where}not valid YAML ({problem})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: (top level): expected a mapping, got {type(data).__name__}")
    problem = _schema_error(path, data)
    if problem:
        raise ConfigError(problem)

    areas = {
        name: AreaSpec(name, a["description"], tuple(a["dtypes"]), tuple(a["builtins"]),
                       frozenset(a.get("features", ())), frozenset(a.get("limits", ())),
                       a.get("timeout_s"))
        for name, a in data["areas"].items()
    }
    devices = {}
    for name, d in data["devices"].items():
        listed = _expand_areas(path, f"devices.{name}.areas", d["areas"], areas)
        errors = d.get("errors", {})
        must = d.get("must_pass")
        devices[name] = DeviceSpec(
            name, frozenset(d["dtypes"]), listed, d.get("description", ""),
            errors.get("after", "keeps_working"), errors.get("isolate", True),
            dict(d.get("toolchain", {})),
            None if must is None else MustPass(
                _expand_areas(path, f"devices.{name}.must_pass.areas", must["areas"], areas),
                tuple(must.get("impls", ())),
                tuple((_as_tuple(e["match"]), e["reason"]) for e in must.get("except", ()))),
        )
    rules = _rules(path, data)
    measured = {}
    for dev, dists in (data.get("measured") or {}).items():
        measured[dev] = {}
        for dist, releases in dists.items():
            for i, release in enumerate(releases):
                try:
                    Version(str(release))
                except InvalidVersion:
                    raise ConfigError(f"{path}: measured.{dev}.{dist}[{i}]: {release!r} is "
                                      "not a release version (e.g. 2.14.1)") from None
            measured[dev][canonicalize_name(dist)] = tuple(
                sorted((str(r) for r in releases), key=Version))
    expanded = []
    for rule in rules:
        covered = _expand_areas(path, rule.label, [rule.area], areas, single=True)
        for name in sorted(covered):
            vocab = areas[name].vocabulary
            for key, kind, names in (("features", "feature", rule.features),
                                     ("dtypes", "dtype", rule.dtypes)):
                problem = vocab.unknown(kind, names)
                if problem:  # names the area: "unknown dtype 'x' for area sampler.normal"
                    raise ConfigError(f"{path}: {rule.label}.{key}: {problem}")
        expanded.append(replace(rule, areas=covered))
    rules = tuple(expanded)
    return Matrix(path=path, areas=areas, devices=devices, rules=rules,
                  measured=measured)
