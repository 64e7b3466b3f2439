"""The pytest plugin: options, markers, parametrisation by implementation, matrix rules,
outcome accounting and the report. Registered through the ``pytest11`` entry point."""

from __future__ import annotations

import atexit
import gc
import json
import os
import warnings
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

from conformance import deadline, memo, repro_trace, schedule, sharding, threads
from conformance.accounting import Accounting, MatrixWarning
from conformance.deps import PROBED_TAGS
from conformance.errors import ConfigError
from conformance.expectations import observe, wrong_reason
from conformance.failures import classify_exception, context_block, tail
from conformance.outcomes import SKIPPED_TAG, UNSUPPORTED_TAG
from conformance.profiles import apply_profile
from conformance.record import Record, reproduce_command
from conformance.registry import Impl
from conformance.report import (
    META_KEY,
    REASON_KEY,
    RECORD_KEY,
    Collector,
)
from conformance.runstate import PROFILES, RunState
from conformance.versions import installed_version, narrowed

HEADER_VERSIONS = ("torch", "triton", "numpy", "scipy")

# the isolated fixture and marker, --isolation (loaded when this plugin registers)
pytest_plugins = ["conformance.isolation_plugin"]

STATE = pytest.StashKey[RunState]()
COLLECTOR = pytest.StashKey[Collector]()
ITEM_META = pytest.StashKey[dict]()
ITEM_TOLERANCE = pytest.StashKey[tuple]()
ITEM_RECORD = pytest.StashKey[Record]()
ITEM_EXPECT = pytest.StashKey[list]()
ITEM_BEYOND = pytest.StashKey[list]()  # "fixed in X?" notes of entries past their measurements


NO_IMPL_MARK = pytest.mark.conformance_no_impl


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torch-conformance")
    group.addoption("--device", default="auto",
                    help="device to qualify: auto (default: best accelerator, else cpu), "
                         "cpu, cuda (also ROCm), mps, xpu")
    group.addoption("--device-matrix", default=None, metavar="PATH",
                    help="capability matrix (default: the project's device_matrix.yaml)")
    group.addoption("--impl", action="append", dest="conformance_impl", default=[],
                    metavar="AREA=module:attr",
                    help="add an implementation under test (repeatable)")
    group.addoption("--no-builtins", action="store_true", default=False,
                    help="test only --impl / entry-point implementations")
    group.addoption("--profile", dest="conformance_profile", default="ci", choices=PROFILES,
                    help="ci (default: bounded, seed 0), dev, thorough")
    group.addoption("--seed", dest="conformance_seed", type=int, default=None,
                    help="seed for Hypothesis and test data (default 0 in ci, random otherwise)")
    group.addoption("--report", dest="conformance_report", default=None, metavar="DIR",
                    help="write report.json, summary.md and junit.xml into DIR")
    group.addoption("--allow-empty", dest="conformance_allow_empty", action="store_true",
                    default=False,
                    help="accept an --impl / entry-point implementation that ran no check "
                         "(otherwise the run fails: it tested nothing)")
    group.addoption("--emulated", dest="conformance_emulated", action="store_true",
                    default=False,
                    help="also run the built-in emulations of our own GPU kernels on this "
                         "device (our Triton kernels in Triton's interpreter, the FA4 numerics "
                         "model): project tests rather than a qualification of the device")
    group.addoption("--repro-dir", dest="conformance_repro_dir", default=None, metavar="DIR",
                    help="write a standalone reproducer script (torch and numpy only) for "
                         "every failed check into DIR")
    sharding.addoption(group)
    deadline.addoption(group)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "area(name): the conformance area a test belongs to")
    config.addinivalue_line("markers", "needs(*features): implementation features a test needs")
    config.addinivalue_line("markers",
                            "conformance_no_impl: internal (an area with no implementation)")
    worker_seed = getattr(config, "workerinput", {}).get("conformance_seed")
    try:
        state = RunState.from_options(config.option, worker_seed)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    state.shard = sharding.configure(config)
    deadline.configure(config)
    config.stash[STATE] = state
    config.stash[COLLECTOR] = Collector()
    threads.configure(state.device.kind,
                      int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))
    apply_profile(state.profile, state.seed)
    if state.report_dir is not None and not getattr(config.option, "xmlpath", None):
        config.option.xmlpath = str(state.report_dir / "junit.xml")
    if hasattr(config, "workerinput"):
        memo.attach(config.workerinput.get("conformance_memo_dir"))
    else:
        memo.start()
        config.pluginmanager.register(Accounting(config, state, config.stash[COLLECTOR]),
                                      "torch-conformance-accounting")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: hand the controller's seed and memo directory to every worker."""
    node.workerinput["conformance_seed"] = node.config.stash[STATE].seed
    node.workerinput["conformance_memo_dir"] = memo.directory()
    deadline.configure_node(node)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    deadline.check(item)  # --time-budget: past it, the test is skipped for time


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    memo.stop()
    # At exit, skip the cyclic garbage collection of everything a session built (Dynamo and
    # Inductor caches, FX graphs): 1.6 s of an xdist worker's exit after 100 FlexAttention
    # tests, 4 to 7 s after a qualification, each waited for by the controller. Objects
    # are still freed by reference counting (their finalisers run); the rest is the OS's.
    # Registered last, so it runs before every other exit handler.
    atexit.register(gc.freeze)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist: ``-n N`` without ``--dist`` schedules by area (conformance/schedule.py)."""
    return schedule.make_scheduler(config, log)


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = config.stash[STATE]
    impls = ", ".join(f"{i.area}:{i.name}" for i in state.registry.all()) or "(none)"
    return [
        f"torch-conformance: device {state.device.torch_device} ({state.device.name}), "
        f"matrix key {state.device.matrix_key}, torch {torch.__version__}",
        f"torch-conformance: profile {state.profile}, seed {state.seed} "
        f"(reproduce with --seed={state.seed}), matrix {state.matrix.path}",
        f"torch-conformance: implementations: {impls}",
        "torch-conformance: versions: " + ", ".join(
            f"{d} {installed_version(d) or '(not installed)'}" for d in HEADER_VERSIONS),
        *(f"torch-conformance: {tag} absent: {why}"
          for tag, why in sorted(state.device.absent.items()) if tag in PROBED_TAGS),
    ]


def _area_of(node: Any) -> str | None:
    marker = node.get_closest_marker("area")
    return marker.args[0] if marker and marker.args else None


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    area = _area_of(metafunc.definition)
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
        metafunc.parametrize("dtype", dtypes, ids=_dtype_name)


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


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    state = config.stash[STATE]
    tags, key = state.device.tags, state.device.matrix_key
    empty = [i for i in items if i.get_closest_marker(NO_IMPL_MARK.name) is not None]
    if empty:  # areas without any implementation: no test each, one summary line per area
        items[:] = [i for i in items if i.get_closest_marker(NO_IMPL_MARK.name) is None]
        config.hook.pytest_deselected(items=empty)
    collected_ids: dict[str, list[str]] = {}
    for item in items:
        area = _area_of(item)
        if area is None:
            continue
        params = getattr(item, "callspec", None)
        params = params.params if params else {}
        impl = params.get("impl")
        dtype = params.get("dtype")
        meta = {
            "area": area,
            "impl": impl.name if isinstance(impl, Impl) else None,
            "impl_spec": impl.spec if isinstance(impl, Impl) else None,
            "device": state.device.torch_device,
            "dtype": _dtype_name(dtype) if dtype is not None else None,
            "params": {k: _dtype_name(v) if isinstance(v, torch.dtype) else
                       (v.name if isinstance(v, Impl) else v)
                       for k, v in params.items()
                       if isinstance(v, (int, float, str, bool, torch.dtype, Impl))},
        }
        meta["reproduce"] = reproduce_command(item.nodeid, state.repro_args(meta["impl_spec"]))
        item.stash[ITEM_META] = meta
        collected_ids.setdefault(area, []).append(item.nodeid)
        meta["matrix_entries"] = applied = []  # labels of the entries that decided the case
        reason = _unsupported_reason(item, state, meta)
        rules = state.matrix.applicable("unsupported", item.nodeid, area, key, tags)
        if reason is None and rules:
            reason = f"matrix {rules[0].label}: {rules[0].reason}"
            applied.append(rules[0].label)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"{UNSUPPORTED_TAG} {reason}"))
            continue
        budget = [r for r in state.matrix.applicable("budget", item.nodeid, area, key, tags)
                  if state.profile in r.profiles]
        if budget:
            applied.append(budget[0].label)
            item.add_marker(pytest.mark.skip(reason=(
                f"{SKIPPED_TAG} left out by the {state.profile} profile: matrix "
                f"{budget[0].label}: {budget[0].reason} (--profile "
                f"{' or '.join(p for p in PROFILES if p not in budget[0].profiles)} runs it)")))
            continue
        missing = _missing_reason(item, state)
        if missing is not None:
            item.add_marker(pytest.mark.skip(reason=f"{SKIPPED_TAG} {missing}"))
            continue
        xfails = state.matrix.applicable("expected_failure", item.nodeid, area, key, tags)
        if xfails:
            applied.extend(r.label for r in xfails)
            reason = "; ".join(f"matrix {r.label}: {r.reason} ({r.link})" for r in xfails)
            # past the releases an entry was measured on, a pass is a likely fix, not a failure
            beyond = {r.label: b for r in xfails if (b := state.matrix.beyond_measured(r, key))}
            item.add_marker(pytest.mark.xfail(reason=reason, strict=any(
                r.strict and r.label not in beyond for r in xfails)))
            item.stash[ITEM_EXPECT] = [(r.label, r.expect) for r in xfails if r.expect]
            item.stash[ITEM_BEYOND] = [fixed_in_note(r, *beyond[r.label])
                                       for r in xfails if r.strict and r.label in beyond]
        loosen = state.matrix.applicable("tolerance", item.nodeid, area, key, tags)
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
        if rule.area not in ids:
            continue
        if rule.is_capability_rule:
            names = [i.name for i in state.registry.for_area(rule.area)]
            if any(rule.matches_impl(n) for n in names):
                continue
            what = f"impls {list(rule.impls)}) matches no registered implementation"
        elif any(rule.matches_id(i) for i in ids[rule.area]):
            continue
        else:
            what = f"match {list(rule.patterns)}) matches no collected test"
        warnings.warn(MatrixWarning(
            f"{state.matrix.path}: {rule.label} (area {rule.area}, {what}"), stacklevel=1)


@pytest.fixture(scope="session")
def conformance_state(pytestconfig: pytest.Config) -> RunState:
    """The run's device, matrix, registry, profile and seed."""
    return pytestconfig.stash[STATE]


@pytest.fixture(scope="session")
def device(conformance_state: RunState) -> torch.device:
    """The torch device under qualification (one per run; xdist workers are pinned)."""
    return torch.device(conformance_state.device.torch_device)


@pytest.fixture
def record(request: pytest.FixtureRequest, conformance_state: RunState) -> Iterator[Record]:
    """The test's Record: ``record.case(...)``, ``record.require(measurement)``."""
    meta = request.node.stash.get(ITEM_META, None)
    if meta is None:
        raise RuntimeError("the record fixture needs a test marked with @pytest.mark.area")
    factor, reasons = request.node.stash.get(ITEM_TOLERANCE, (1.0, ()))
    rec = Record(
        nodeid=request.node.nodeid,
        area=meta["area"],
        impl=meta["impl"] or "-",
        device=meta["device"],
        dtype=meta["dtype"],
        repro_args=conformance_state.repro_args(meta["impl_spec"]),
        tolerance_factor=factor,
        tolerance_reasons=reasons,
    )
    request.node.stash[ITEM_RECORD] = rec
    if conformance_state.repro_dir is None:
        yield rec
        return
    trace = repro_trace.Trace()
    impl = request.node.callspec.params.get("impl") if hasattr(request.node, "callspec") \
        else None
    rec.on_failure = _repro_writer(conformance_state, trace,
                                   impl if isinstance(impl, Impl) else None)
    with repro_trace.tracing(trace):
        yield rec


def _repro_writer(state: RunState, trace: repro_trace.Trace, impl: Impl | None) -> Any:
    def write(rec: Record, message: str, m: Any) -> str | None:
        from conformance.repro import write_failure

        try:
            path = write_failure(state.repro_dir, rec, message, m, trace=trace, impl=impl,
                                 state=state)
        except Exception as exc:  # the verdict stands without its script
            warnings.warn(f"--repro-dir: no script for {rec.nodeid}: "
                          f"{type(exc).__name__}: {exc}", stacklevel=1)
            return None
        return str(path) if path else None
    return write


@pytest.fixture
def run_seed(conformance_state: RunState) -> int:
    """The run's --seed (0 under the ci profile, random under dev): areas with fixed base
    seeds add it, so a dev run draws fresh data and the report's reproduce line repeats it."""
    return int(conformance_state.seed)


@pytest.fixture
def rng(request: pytest.FixtureRequest, conformance_state: RunState) -> np.random.Generator:
    """A numpy Generator seeded from --seed and the test id (stable across xdist layouts)."""
    salt = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng([conformance_state.seed, salt])


def _wrong_reason(item: pytest.Item, call: pytest.CallInfo,
                  report: pytest.TestReport) -> str | None:
    """For an xfail that failed in another way than its matrix entry states: the verdict
    (the report becomes a failure); else None."""
    expected = item.stash.get(ITEM_EXPECT, None)
    if not expected or report.when != "call" or call.excinfo is None:
        return None
    if not (report.skipped and hasattr(report, "wasxfail")):
        return None
    verdict = wrong_reason(expected, observe(call.excinfo.value))
    if verdict is not None:
        report.outcome = "failed"
        del report.wasxfail
    return verdict


def _explain_failure(item: pytest.Item, call: pytest.CallInfo,
                     report: pytest.TestReport) -> None:
    """A wrong-reason expected failure is a failure headed by its verdict; an exception
    (not a failed check) gets the uniform block: raised by the implementation, or an error
    of the suite itself. The one-line reason goes to the report."""
    wrong = _wrong_reason(item, call, report)
    if report.when != "call" or not report.failed or call.excinfo is None:
        return
    impl = item.callspec.params.get("impl") if hasattr(item, "callspec") else None
    verdict = classify_exception(call.excinfo.value, impl if isinstance(impl, Impl) else None,
                                 wrong)
    original = report.longreprtext
    if verdict is not None:
        rec = item.stash.get(ITEM_RECORD, None)
        block = context_block(verdict, rec, item.stash[ITEM_META])
        if rec is not None and rec.failure is None:  # an exception: replay the call
            rec.write_repro(block, None)
            if rec.repro_script:
                block += f"\n  standalone reproducer: {rec.repro_script}"
        report.longrepr = f"{block}\n\n{tail(original)}"
    elif wrong is not None:  # a failed check, but not the one the entry expects
        verdict, report.longrepr = wrong, f"{wrong}\n\n{original}"
    if verdict is not None:
        report.user_properties.append((REASON_KEY, verdict))


def fixed_in_note(rule: Any, dist: str, installed: str, newest: str) -> str:
    """The verdict of a pass under an expected failure measured on older releases only."""
    release = installed.split("+")[0]
    gate = narrowed(rule.versions, dist, release, newest)
    return (f"fixed in {dist} {release}? matrix {rule.label}: measured failing on {dist} up to "
            f"{newest}; narrow its versions to {dist}{gate}")


def _fixed_in(item: pytest.Item, report: pytest.TestReport) -> None:
    """A strict expected failure that passes on a release newer than those its entry was
    measured on: a pass (the check ran and held), with the entry to narrow as its reason."""
    notes = item.stash.get(ITEM_BEYOND, None)
    if not notes or report.when != "call" or not report.passed:
        return
    if not hasattr(report, "wasxfail"):
        return
    del report.wasxfail
    report.user_properties.append((REASON_KEY, "; ".join(notes)))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # outermost: sees the xfail verdict
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    outcome = yield
    meta = item.stash.get(ITEM_META, None)
    if meta is None:
        return
    report = outcome.get_result()
    _explain_failure(item, call, report)
    _fixed_in(item, report)
    report.user_properties.append((META_KEY, json.dumps(meta, default=str)))
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        report.user_properties.append(("conformance_worker", worker))
    rec = item.stash.get(ITEM_RECORD, None)
    if rec is not None and report.when == "call":
        report.user_properties.append((RECORD_KEY, json.dumps(rec.to_json(), default=str)))
