"""Collection: parametrisation by implementation and dtype, and the matrix applied to each
collected test (unsupported, budget, missing requirement, expected failure, tolerance)."""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any

import pytest
import torch

from conformance.harness.outcomes import SKIPPED_TAG, UNSUPPORTED_TAG
from conformance.harness.record import reproduce_command
from conformance.harness.registry import Impl
from conformance.harness.runstate import MUST_PASS, PROFILES, STATE, RunState
from conformance.run.accounting import MatrixWarning
from conformance.run.keys import (
    ITEM_EXPECT,
    ITEM_META,
    ITEM_PASS_NOTES,
    ITEM_TOLERANCE,
    NO_IMPL_MARK,
)
from conformance.run.verdicts import fixed_in_note, not_present_note


def area_of(node: Any) -> str | None:
    marker = node.get_closest_marker("area")
    return marker.args[0] if marker and marker.args else None


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def parametrize(metafunc: pytest.Metafunc) -> None:
    """Parametrise an area's test by implementation and dtype (the matrix's)."""
    area = area_of(metafunc.definition)
    if area is None:
        return
    state = metafunc.config.stash[STATE]
    explicit = {
        name for m in metafunc.definition.iter_markers("parametrize")
        for name in (m.args[0].split(",") if isinstance(m.args[0], str) else m.args[0])
    }
    if area not in state.matrix.areas:  # a matrix that leaves the area out: unsupported
        skip = pytest.mark.skip(reason=f"{UNSUPPORTED_TAG} the matrix {state.matrix.path} "
                                       f"has no area {area!r}")
        for name in ("impl", "dtype"):
            if name in metafunc.fixturenames and name not in explicit:
                metafunc.parametrize(name, [pytest.param(None, marks=skip)], ids=["-"])
        return
    if "impl" in metafunc.fixturenames:
        impls = state.registry.for_area(area)
        if impls:
            metafunc.parametrize("impl", impls, ids=[i.name for i in impls])
        else:
            # deselected at collection; the summary gives the area one line instead
            metafunc.parametrize("impl", [pytest.param(None, marks=NO_IMPL_MARK)],
                                 ids=["no-impl"])
    if "dtype" in metafunc.fixturenames and "dtype" not in explicit:
        dtypes = [getattr(torch, d) for d in state.matrix.areas[area].dtypes]
        metafunc.parametrize("dtype", dtypes, ids=dtype_name)


def _unsupported_reason(item: pytest.Item, state: RunState, meta: dict[str, Any]) -> str | None:
    key, area, dtype = state.device.matrix_key, meta["area"], meta["dtype"]
    spec = state.matrix.devices.get(key)
    if spec is None:
        return f"the matrix has no entry for device {key!r}"
    if area not in spec.areas:
        return f"the matrix does not list area {area!r} for device {key!r}"
    if dtype is not None and dtype not in spec.dtypes:
        return f"the matrix does not list dtype {dtype} for device {key!r}"
    impl = item.callspec.params.get("impl") if hasattr(item, "callspec") else None
    if isinstance(impl, Impl):
        needs = [f for m in item.iter_markers("needs") for f in m.args]
        lacks = impl.caps.lacks(dtype=dtype, device=key, features=needs)
        if lacks:
            return f"implementation {impl.name} {lacks}"
    return None


def _missing_reason(item: pytest.Item, state: RunState) -> str | None:
    impl = item.callspec.params.get("impl") if hasattr(item, "callspec") else None
    if isinstance(impl, Impl):
        missing = impl.caps.missing_requirements(state.device.tags)
        if missing:
            why = [state.device.absent[t] for r in missing for t in r.split("|")
                   if t in state.device.absent]
            detail = "; ".join(dict.fromkeys(why)) or (
                f"not present: tags here are {', '.join(sorted(state.device.tags))}")
            return f"implementation {impl.name} requires {', '.join(missing)} ({detail})"
        emulation = getattr(impl.fn, "conformance_emulation", None)
        if emulation and impl.origin == "builtin" and not state.emulated:
            return (f"implementation {impl.name} is {emulation}: it tests our kernel, not "
                    "this device, so the project's tests run it; opt in with --emulated")
    return None


def apply_matrix(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each item's metadata and the matrix's verdict on it: unsupported, left out by the
    profile, missing a requirement, expected to fail (strict or not), loosened."""
    state = config.stash[STATE]
    tags, key = state.device.tags, state.device.matrix_key
    empty = [i for i in items if i.get_closest_marker(NO_IMPL_MARK.name) is not None]
    if empty:  # areas without any implementation: no test each, one summary line per area
        items[:] = [i for i in items if i.get_closest_marker(NO_IMPL_MARK.name) is None]
        config.hook.pytest_deselected(items=empty)
    collected_ids: dict[str, list[str]] = {}
    spec = state.matrix.devices.get(key)
    must = spec.must_pass if spec is not None else None
    required = config.stash.setdefault(MUST_PASS, {})
    for item in items:
        area = area_of(item)
        if area is None:
            continue
        params = getattr(item, "callspec", None)
        params = params.params if params else {}
        impl = params.get("impl")
        dtype = params.get("dtype")
        test_impl = impl if isinstance(impl, Impl) else None  # whose bug an entry names
        entries = partial(state.matrix.applicable, nodeid=item.nodeid, area=area, device=key,
                          tags=tags, impl=test_impl)
        meta = {
            "area": area,
            "impl": impl.name if isinstance(impl, Impl) else None,
            "impl_spec": impl.spec if isinstance(impl, Impl) else None,
            "device": state.device.torch_device,
            "dtype": dtype_name(dtype) if dtype is not None else None,
            "params": {k: dtype_name(v) if isinstance(v, torch.dtype) else
                       (v.name if isinstance(v, Impl) else v)
                       for k, v in params.items()
                       if isinstance(v, (int, float, str, bool, torch.dtype, Impl))},
        }
        meta["reproduce"] = reproduce_command(item.nodeid, state.repro_args(meta["impl_spec"]),
                                              item.path, meta["impl_spec"])
        item.stash[ITEM_META] = meta
        collected_ids.setdefault(area, []).append(item.nodeid)
        meta["matrix_entries"] = applied = []  # labels of the entries that decided the case
        reason = _unsupported_reason(item, state, meta)
        rules = entries("unsupported")
        if reason is None and rules:
            reason = f"matrix {rules[0].label}: {rules[0].reason}"
            applied.append(rules[0].label)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"{UNSUPPORTED_TAG} {reason}"))
            continue
        budget = [r for r in entries("budget")
                  if state.profile in r.profiles]
        if budget:  # a profile's choice: off the must-pass list of this profile
            applied.append(budget[0].label)
            item.add_marker(pytest.mark.skip(reason=(
                f"{SKIPPED_TAG} left out by the {state.profile} profile: matrix "
                f"{budget[0].label}: {budget[0].reason} (--profile "
                f"{' or '.join(p for p in PROFILES if p not in budget[0].profiles)} runs it)")))
            continue
        xfails = entries("expected_failure")
        emulation = test_impl is not None and bool(getattr(test_impl.fn, "conformance_emulation",
                                                            None))
        if (must is not None and not xfails and not (emulation and not state.emulated)
                and must.why_not(item.nodeid, area, test_impl) is None):
            meta["must_pass"] = True  # a skip, a not-run or a deselection counts against
            required[item.nodeid] = meta
        missing = _missing_reason(item, state)
        if missing is not None:
            item.add_marker(pytest.mark.skip(reason=f"{SKIPPED_TAG} {missing}"))
            continue
        if xfails:
            applied.extend(r.label for r in xfails)
            reason = "; ".join(f"matrix {r.label}: {r.reason} ({r.link})" for r in xfails)
            # past the releases an entry was measured on, a pass is a likely fix, not a failure
            beyond = {r.label: b for r in xfails if (b := state.matrix.beyond_measured(r, key))}
            # a build without the bug passes: reported, not failed (--stale-entries=report);
            # the suite's own CI (fail) keeps entries current within their measured releases
            stale_fails = state.stale_entries == "fail"
            item.add_marker(pytest.mark.xfail(reason=reason, strict=stale_fails and any(
                r.strict and r.label not in beyond for r in xfails)))
            item.stash[ITEM_EXPECT] = [(r.label, r.expect) for r in xfails if r.expect]
            item.stash[ITEM_PASS_NOTES] = [
                fixed_in_note(r, *beyond[r.label]) if r.label in beyond else not_present_note(r)
                for r in xfails if r.strict and (r.label in beyond or not stale_fails)]
            if not any(r.strict for r in xfails):  # "may fail": a pass is a pass
                item.stash[ITEM_PASS_NOTES] = [f"passed; matrix {r.label} (not strict) allows a "
                                           f"failure here" for r in xfails]
        loosen = entries("tolerance")
        if loosen:
            applied.extend(r.label for r in loosen)
            factor = max(r.factor for r in loosen)
            item.stash[ITEM_TOLERANCE] = (factor, tuple(f"{r.label}: {r.reason}" for r in loosen))
    _warn_unmatched(state, collected_ids)


def _warn_unmatched(state: RunState, ids: dict[str, list[str]]) -> None:
    """Warn for matrix entries of a collected area that match none of its tests (or, for
    capability entries, none of its implementations). Under xdist the workers collect and
    warn; the controller records the forwarded warnings."""
    for rule in state.matrix.rules:
        covered = [a for a in ids if rule.covers(a)]
        if not covered:
            continue
        if rule.is_capability_rule:
            if any(rule.matches_impl(i) for a in covered for i in state.registry.for_area(a)):
                continue
            what = f"impls {list(rule.impls)}) matches no registered implementation"
        elif any(rule.matches_id(i) for a in covered for i in ids[a]):
            continue
        else:
            what = f"match {list(rule.patterns)}) matches no collected test"
        warnings.warn(MatrixWarning(
            f"{state.matrix.path}: {rule.label} (area {rule.area}, {what}"), stacklevel=1)
