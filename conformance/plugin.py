"""The pytest plugin (``pytest11`` entry point): the options, and each hook a call into the
packages: ``run`` (collection, verdicts, accounting, deadline, sharding, scheduling),
``harness`` (the run state, profiles, memo) and ``report``."""

from __future__ import annotations

import atexit
import gc
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from conformance.harness import history, lifetime, memo, quiet_exit, threads
from conformance.harness.deps import PROBED_TAGS
from conformance.harness.errors import ConfigError
from conformance.harness.profiles import apply_profile
from conformance.harness.runstate import PROFILES, STALE_ENTRIES, STATE, RunState
from conformance.harness.versions import installed_version
from conformance.report.collect import Collector
from conformance.report.suite import describe as describe_suite
from conformance.report.suite import identity
from conformance.run import (
    collection,
    deadline,
    guards,
    schedule,
    sharding,
    startup,
    verdicts,
    watchdog,
)
from conformance.run.accounting import Accounting
from conformance.run.keys import COLLECTOR

HEADER_VERSIONS = ("torch", "triton", "numpy", "scipy")
_SESSION_START: dict[str, Any] = {}  # harness/history.py's snapshot, taken at configure

quiet_exit.install()  # first exit handler registered: it runs after the others

# the fixtures areas use; the isolated fixture and marker, --isolation; --repro-dir;
# --test-order's reordering (after every deselection)
pytest_plugins = ["conformance.run.isolation", "conformance.run.fixtures",
                  "conformance.run.repro_hooks", "conformance.run.order",
                  "conformance.run.impl_stop"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torch-conformance")
    group.addoption("--device", default="auto",
                    help="device to qualify: auto (default: best accelerator, else cpu), "
                         "cpu, cuda (also ROCm), mps, xpu; cuda:N / xpu:N: GPU N for "
                         "every xdist worker")
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
    group.addoption("--stale-entries", dest="conformance_stale_entries", default="report",
                    choices=STALE_ENTRIES,
                    help="a check that passes where the matrix expects a known bug's failure: "
                         "report (default: passed, 'bug not present in this build', listed "
                         "in summary.md and by diff) or fail (within the releases the entry "
                         "was measured on: the suite's own CI keeps its matrix current)")
    group.addoption("--repro-dir", dest="conformance_repro_dir", default=None, metavar="DIR",
                    help="write a standalone reproducer script (torch and numpy only) for "
                         "every failed check into DIR")
    sharding.addoption(group)
    deadline.addoption(group)
    watchdog.addoption(group)
    startup.addoption(group)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(lifetime.DIE_WITH_PARENT_ENV) == "1":  # the campaign's stages
        lifetime.die_with_parent()
    startup.start(config)  # importing the implementations and collecting, under a timer
    config.addinivalue_line("markers", "area(name): the conformance area a test belongs to")
    config.addinivalue_line("markers", "needs(*features): implementation features a test needs")
    config.addinivalue_line("markers",
                            "conformance_no_impl: internal (an area with no implementation)")
    misread = guards.misread_path_option(config)
    if misread is not None:
        raise pytest.UsageError(misread)
    if not hasattr(config, "workerinput"):
        guards.args_for_workers(config)  # before xdist starts its workers with them
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
    _SESSION_START.update(history.snapshot())  # after threads.configure: its thread count
    if state.report_dir is not None and not getattr(config.option, "xmlpath", None):
        config.option.xmlpath = str(state.report_dir / "junit.xml")
    if hasattr(config, "workerinput"):
        memo.attach(config.workerinput.get("conformance_memo_dir"))
        folder = Path(config.workerinput["conformance_run_folder"])
        worker = config.workerinput.get("workerid", "gw")
    else:
        memo.start()
        accounting = Accounting(config, state, config.stash[COLLECTOR])
        config.pluginmanager.register(accounting, "torch-conformance-accounting")
        folder, worker = accounting.folder, "main"
    deadline.attach(config, folder)
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        config.pluginmanager.register(watchdog.Watchdog(config, state, folder, worker),
                                      "torch-conformance-watchdog")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: hand the controller's seed and memo directory to every worker."""
    node.workerinput["conformance_seed"] = node.config.stash[STATE].seed
    node.workerinput["conformance_memo_dir"] = memo.directory()
    accounting = node.config.pluginmanager.get_plugin("torch-conformance-accounting")
    node.workerinput["conformance_run_folder"] = str(accounting.folder)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    deadline.check(item)  # --time-budget: past it, the test is not run
    history.fresh_compile_state()  # no verdict depends on what compiled before it,
    history.restore(_SESSION_START)  # nor on settings or generator draws an earlier test left


def pytest_sessionstart(session: pytest.Session) -> None:
    if getattr(session.config.option, "numprocesses", None) and not hasattr(
            session.config, "workerinput"):
        startup.stop()  # the xdist controller: its workers collect, each under its own timer


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    startup.stop()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    accounting = node.config.pluginmanager.get_plugin("torch-conformance-accounting")
    if error and accounting is not None:
        startup.worker_down(accounting.folder, node.gateway.id)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    startup.stop()
    memo.stop()
    # At exit, skip the cyclic garbage collection of everything a session built (Dynamo and
    # Inductor caches, FX graphs): 1.6 s of an xdist worker's exit after 100 FlexAttention
    # tests, 4 to 7 s after a qualification, each waited for by the controller. Objects
    # are still freed by reference counting (their finalisers run); the rest is the OS's.
    # Registered last, so it runs before every other exit handler.
    atexit.register(gc.freeze)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist: ``-n N`` without ``--dist`` schedules by area (conformance/run/schedule.py)."""
    return schedule.make_scheduler(config, log)


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = config.stash[STATE]
    impls = state.registry.all()
    builtin = [i for i in impls if i.origin == "builtin"]
    yours = [f"{i.area}={i.spec} ({i.origin})" for i in impls if i.origin != "builtin"]
    listed = (f"{len(builtin)} built-in in {len({i.area for i in builtin})} areas"
              + (f"; yours: {', '.join(yours)}" if yours else "")) if impls else "(none)"
    return [
        f"torch-conformance: device {state.device.torch_device} ({state.device.name}), "
        f"matrix key {state.device.matrix_key}, torch {torch.__version__}",
        f"torch-conformance: suite {describe_suite(identity())}",
        f"torch-conformance: profile {state.profile}, seed {state.seed} "
        f"(reproduce with --seed={state.seed}), matrix {state.matrix.path}",
        f"torch-conformance: implementations: {listed}",
        "torch-conformance: versions: " + ", ".join(
            f"{d} {installed_version(d) or '(not installed)'}" for d in HEADER_VERSIONS),
        *([f"torch-conformance: {newer}"]
          if (newer := state.matrix.newer_than_measured(state.device.matrix_key)) else []),
        *(f"torch-conformance: {tag} absent: {why}"
          for tag, why in sorted(state.device.absent.items()) if tag in PROBED_TAGS),
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    collection.parametrize(metafunc)


@pytest.hookimpl(tryfirst=True)  # before -k / -m deselection: the whole must-pass list
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    collection.apply_matrix(config, items)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # outermost: sees the xfail verdict
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    outcome = yield
    verdicts.annotate(item, call, outcome.get_result())
