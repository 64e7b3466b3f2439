"""Implementations under test, per area: built-ins from the matrix, ``--impl`` and entry points.

The contract for an implementation is a callable with the semantics of the area's torch
reference (``torch.topk`` for topk, ``torch.matmul`` for gemm, ...). Optional attributes on
the callable declare what it supports; an absent attribute claims everything:

- ``conformance_name``: str, the name used in test ids and reports
- ``conformance_dtypes``: iterable of dtype names ("float16", "int64", ...)
- ``conformance_devices``: iterable of device kinds ("cpu", "cuda", "rocm", "mps", "xpu")
- ``conformance_features``: iterable of feature names the area defines; a dotted feature
  ("mask.causal") is also satisfied by any of its prefixes ("mask")
- ``conformance_limits``: dict of area-defined limits (e.g. {"head_dims": [64, 128]})
- ``conformance_requires``: iterable of capability tags the run must have ("flash-attn-4",
  "sm90|sm100" for any of several); a missing one makes the case "skipped", not failed
- ``conformance_wraps``: the ``module:attr`` of a shipped implementation this one calls (a
  thin wrapper of torch's op): the matrix entries written for that one's bugs apply to it
  too. Without it, an implementation plugged in is touched only by entries naming its spec.

Opt-in features (``OPT_IN``, e.g. ``compile``: the suite wraps the implementation in
``torch.compile``) are claimed only when declared by name, never by an absent attribute.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from conformance.harness import repro_trace
from conformance.harness.errors import ConfigError
from conformance.harness.vocabulary import Vocabulary

ENTRY_POINT_GROUP = "torch_conformance.impls"
OPT_IN = frozenset({"compile"})  # features an absent conformance_features does not claim
_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


@dataclass(frozen=True)
class Capabilities:
    dtypes: frozenset[str] | None = None
    devices: frozenset[str] | None = None
    features: frozenset[str] | None = None
    limits: dict[str, Any] = field(default_factory=dict)
    requires: frozenset[str] = frozenset()
    # removed by the device matrix for this run's device: name -> the matrix's reason
    excluded_features: dict[str, str] = field(default_factory=dict)
    excluded_dtypes: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, obj: Any) -> Capabilities:
        def read(attr: str) -> frozenset[str] | None:
            value = getattr(obj, attr, None)
            if value is None:
                return None
            if isinstance(value, str) or not isinstance(value, Iterable):
                raise ConfigError(f"{attr} must be a list of names, got {value!r}")
            return frozenset(str(v) for v in value)

        limits = getattr(obj, "conformance_limits", None) or {}
        if not isinstance(limits, dict):
            raise ConfigError(f"conformance_limits must be a dict, got {limits!r}")
        return cls(
            read("conformance_dtypes"), read("conformance_devices"),
            read("conformance_features"), dict(limits), read("conformance_requires") or frozenset(),
        )

    def _excluded(self, feature: str) -> str | None:
        parts = feature.split(".")
        for i in range(1, len(parts) + 1):
            reason = self.excluded_features.get(".".join(parts[:i]))
            if reason is not None:
                return reason
        return None

    def claims(self, feature: str) -> bool:
        """True if the feature, or one of its dotted prefixes, is declared (or all are),
        and the matrix did not remove it for this device."""
        if self._excluded(feature) is not None:
            return False
        parts = feature.split(".")
        if self.features is None:
            return parts[0] not in OPT_IN
        return any(".".join(parts[:i]) in self.features for i in range(1, len(parts) + 1))

    def missing_requirements(self, tags: frozenset[str]) -> list[str]:
        """Required capability tags this run lacks ("a|b" needs any one of a, b)."""
        return [r for r in sorted(self.requires) if not set(r.split("|")) & tags]

    def lacks(
        self, *, dtype: str | None = None, device: str | None = None, features: Iterable[str] = ()
    ) -> str | None:
        """Why the implementation does not claim this case, or None if it does."""
        if device is not None and self.devices is not None and device not in self.devices:
            return f"declares devices {sorted(self.devices)}, not {device}"
        if dtype is not None and dtype in self.excluded_dtypes:
            return f"does not support {dtype} here ({self.excluded_dtypes[dtype]})"
        if dtype is not None and self.dtypes is not None and dtype not in self.dtypes:
            return f"declares dtypes {sorted(self.dtypes)}, not {dtype}"
        for f in features:
            reason = self._excluded(f)
            if reason is not None:
                return f"does not support {f} here ({reason})"
        missing = [f for f in features if not self.claims(f)]
        if missing:
            return f"does not declare feature(s) {', '.join(missing)}"
        return None


@dataclass(frozen=True)
class Impl:
    area: str
    name: str
    fn: Callable[..., Any]
    spec: str  # "module:attr"
    origin: str  # "builtin" | "--impl" | "entry point <dist>"
    caps: Capabilities
    wraps: tuple[str, str] | None = None  # (name, spec) of the shipped one it declares it calls

    @property
    def shipped_as(self) -> tuple[str, str] | None:
        """(name, spec) of the shipped implementation whose matrix entries apply to this
        one: itself if shipped, the one it wraps (``conformance_wraps``), else None."""
        return (self.name, self.spec) if self.origin == "builtin" else self.wraps

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        trace = repro_trace.active()
        if trace is None:
            return self.fn(*args, **kwargs)
        return trace.call(self.fn, args, kwargs)

    def __repr__(self) -> str:  # shows up in pytest's failure output
        return f"<impl {self.name} ({self.spec}, {self.origin})>"


def load_object(spec: str, what: str) -> Any:
    """Import ``module:attr``; ConfigError with a one-line message on any problem."""
    if not _SPEC.match(spec):
        raise ConfigError(f"{what}: {spec!r} is not of the form module:attr")
    module_name, attr_path = spec.split(":", 1)
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise ConfigError(f"{what}: no module named {module_name!r}") from None
        raise ConfigError(f"{what}: importing {module_name!r} failed: {exc}") from None
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise ConfigError(
            f"{what}: importing {module_name!r} raised {type(exc).__name__}: {first}"
        ) from None
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{what}: module {module_name!r} has no attribute {attr_path!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(f"{what}: {spec} is a {type(obj).__name__}, not callable")
    return obj


def _check_vocabulary(caps: Capabilities, vocab: Vocabulary) -> str | None:
    """The first declared name outside the area's vocabulary, as 'attribute: problem'."""
    for attr, kind, names in (
        ("conformance_features", "feature", caps.features or ()),
        ("conformance_dtypes", "dtype", caps.dtypes or ()),
        ("conformance_devices", "device", caps.devices or ()),
        ("conformance_limits", "limit", caps.limits.keys()),
    ):
        problem = vocab.unknown(kind, sorted(names))
        if problem:
            return f"{attr}: {problem}"
    return None


def make_impl(area: str, spec: str, origin: str, what: str,
              vocab: Vocabulary | None = None) -> Impl:
    fn = load_object(spec, what)
    try:
        caps = Capabilities.of(fn)
    except ConfigError as exc:
        raise ConfigError(f"{what}: {spec}: {exc}") from None
    problem = _check_vocabulary(caps, vocab) if vocab is not None else None
    if problem:
        raise ConfigError(f"{what}: {spec}: {problem}")
    name = getattr(fn, "conformance_name", None) or spec
    if not isinstance(name, str) or not name.strip() or any(c in name for c in "[]\n"):
        raise ConfigError(f"{what}: {spec}: conformance_name must be a non-empty one-line name")
    return Impl(area, name, fn, spec, origin, caps, _wrapped(fn, spec, what))


def _wrapped(fn: Any, spec: str, what: str) -> tuple[str, str] | None:
    target = getattr(fn, "conformance_wraps", None)
    if target is None:
        return None
    if not isinstance(target, str):
        raise ConfigError(f"{what}: {spec}: conformance_wraps must be a 'module:attr' string")
    wrapped = load_object(target, f"{what}: {spec}: conformance_wraps")
    return getattr(wrapped, "conformance_name", None) or target, target


def parse_impl_option(text: str, areas: Iterable[str]) -> tuple[str, str]:
    """Split ``AREA=module:attr`` and check the area exists."""
    known = sorted(areas)
    if "=" not in text:
        raise ConfigError(f"--impl {text!r}: expected AREA=module:attr (areas: {', '.join(known)})")
    area, spec = (s.strip() for s in text.split("=", 1))
    if area not in known:
        raise ConfigError(f"--impl {text!r}: unknown area {area!r} (expected one of: "
                          f"{', '.join(known)})")
    return area, spec


class Registry:
    """All implementations of every area for this run."""

    def __init__(self) -> None:
        self._by_area: dict[str, list[Impl]] = {}

    def add(self, impl: Impl) -> None:
        impls = self._by_area.setdefault(impl.area, [])
        if any(i.spec == impl.spec for i in impls):
            return
        name, n = impl.name, 2
        while any(i.name == name for i in impls):
            name, n = f"{impl.name}#{n}", n + 1
        if name != impl.name:
            impl = replace(impl, name=name)
        impls.append(impl)

    def restrict(self, area: str, match: Callable[[Impl], bool], features: Iterable[str],
                 dtypes: Iterable[str], reason: str) -> int:
        """Remove features/dtypes from the matching implementations; returns how many."""
        hits = 0
        impls = self._by_area.get(area, [])
        for i, impl in enumerate(impls):
            if not match(impl):
                continue
            caps = impl.caps
            caps = replace(caps,
                           excluded_features={**caps.excluded_features,
                                              **dict.fromkeys(features, reason)},
                           excluded_dtypes={**caps.excluded_dtypes,
                                            **dict.fromkeys(dtypes, reason)})
            impls[i] = replace(impl, caps=caps)
            hits += 1
        return hits

    def for_area(self, area: str) -> list[Impl]:
        return list(self._by_area.get(area, []))

    def all(self) -> list[Impl]:
        return [i for impls in self._by_area.values() for i in impls]


def build_registry(
    builtins: dict[str, Iterable[str]],
    impl_options: Iterable[str],
    *,
    include_builtins: bool = True,
    use_entry_points: bool = True,
    vocabularies: dict[str, Vocabulary] | None = None,
) -> Registry:
    """Built-ins (from the matrix), then ``--impl`` options, then installed entry points.
    With ``vocabularies``, every declared name is checked against its area's."""
    registry = Registry()
    vocab = (vocabularies or {}).get
    if include_builtins:
        for area, specs in builtins.items():
            for spec in specs:
                registry.add(make_impl(area, spec, "builtin", f"matrix areas.{area}.builtins",
                                       vocab(area)))
    for text in impl_options:
        area, spec = parse_impl_option(text, builtins)
        impl = make_impl(area, spec, "--impl", f"--impl {text!r}", vocab(area))
        if spec in builtins[area] and impl.wraps is None:  # the shipped one, by --impl
            impl = replace(impl, wraps=(getattr(impl.fn, "conformance_name", None) or spec,
                                        spec))
        registry.add(impl)
    if use_entry_points:
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = ep.dist.name if ep.dist else "?"
            what = f"entry point {ep.name}={ep.value} ({dist})"
            if ep.name not in builtins:
                raise ConfigError(f"{what}: unknown area {ep.name!r}")
            registry.add(make_impl(ep.name, ep.value, f"entry point {dist}", what,
                                   vocab(ep.name)))
    return registry
