"""``--repro-dir DIR``: a failed check becomes one standalone script per failure group.

The script (torch, numpy and the standard library only; its inputs embedded, compressed)
recomputes the failing call of the implementation with the exact recorded inputs and
judges the result against the oracle's recorded result under the suite's criterion:

- ``recheck``: the area stated the call's criterion (conformance/harness/recheck.py), or the
  failed check compared an output of the call, or an input's gradient after a backward with
  the recorded cotangents, elementwise against the oracle. Exit 1 while the check fails (or
  the call raises), 0 once it passes;
- ``replay``: the call is rebuilt but its check has no standalone form (statistical,
  structural over several calls, an error the call should raise): the script replays it,
  prints the outputs and exits 3 ("cannot re-check here"); a call that raised in the suite
  and still raises exits 1;
- ``none``: the call could not be rebuilt (it ran in a child process or through a runtime
  object, took an argument the script cannot express, or its data exceed ``MAX_PAYLOAD``):
  the script says why and exits 3.

A test process stages at most one candidate per group (area, check, implementation:
conformance/report/triage.py), the best by ``rank``; conformance/report/repro_dir.py keeps
one per group at the end of the run, named ``Group.slug``.
"""

from __future__ import annotations

import ast
import base64
import functools
import hashlib
import importlib
import io
import json
import os
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from jinja2 import Environment, PackageLoader, StrictUndefined

from conformance.harness.compare import Measurement
from conformance.harness.probe import environment
from conformance.harness.record import Record
from conformance.harness.registry import Impl
from conformance.harness.repro_trace import Call, Trace
from conformance.harness.runstate import RunState
from conformance.harness.versions import installed_version
from conformance.report.triage import Group, check_of, group_key

_ALLOWED_ROOTS = {"torch", "numpy", "__future__"} | set(sys.stdlib_module_names)
MAX_PAYLOAD = 4 << 20  # raw bytes of a script's tensors (inputs, cotangents, oracle arrays)
GROUP_LINE = "@@REPRO_GROUP@@"  # replaced at the end of the run (repro_dir.finalize)
STAGING = ".staging"


def staging_dir(directory: Path) -> Path:
    """This process's candidates (one folder per xdist worker)."""
    return directory / STAGING / os.environ.get("PYTEST_XDIST_WORKER", "main")


def key_name(key: tuple[str, str, str]) -> str:
    return hashlib.sha1("\0".join(key).encode()).hexdigest()[:16]


def _module_source(impl: Impl) -> tuple[str | None, str, list[str]]:
    """(source to copy in or None, the file, imports beyond torch/numpy/stdlib)."""
    module = sys.modules.get(impl.spec.split(":", 1)[0]) or importlib.import_module(
        impl.spec.split(":", 1)[0])
    path = getattr(module, "__file__", None)
    if not path or not path.endswith(".py"):
        return None, str(path), ["(no Python source)"]
    text = Path(path).read_text()
    foreign: list[str] = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom):
            name = "." * node.level + (node.module or "")
            if node.level or name.split(".")[0] not in _ALLOWED_ROOTS:
                foreign.append(name)
        elif isinstance(node, ast.Import):
            foreign += [a.name for a in node.names if a.name.split(".")[0] not in _ALLOWED_ROOTS]
    if foreign:
        return None, path, sorted(set(foreign))
    body = "\n".join(line for line in text.splitlines()
                     if not line.startswith("from __future__ import"))
    return body.strip("\n"), path, []


def _source_root(impl: Impl, impl_file: str) -> str:
    depth = impl.spec.split(":", 1)[0].count(".") + 1
    return str(Path(impl_file).resolve().parents[depth - 1]) if impl_file else "."


_ENVIRONMENT: list[tuple[str, str]] = []


def _environment(state: RunState) -> list[tuple[str, str]]:
    """The header's environment: the report's (conformance/harness/probe.py), computed once."""
    if not _ENVIRONMENT:
        env = environment(state.device)
        _ENVIRONMENT.extend([
            ("torch", env["torch"]),
            ("CUDA / HIP / driver", f"{env['cuda'] or '-'} / {env['hip'] or '-'} / "
                                    f"{env['cuda_driver'] or '-'}"),
            ("device", f"{state.device.torch_device} ({state.device.name})"),
            ("cpu", f"{env['cpu']} ({env['cpu_count']} cores)"),
            ("numpy", np.__version__),
            ("python", env["python"]),
            ("platform", env["platform"]),
            ("torch-conformance", installed_version("torch-conformance") or "?"),
        ])
    return [*_ENVIRONMENT, ("suite profile / seed", f"{state.profile} / {state.seed}")]


@dataclass
class Plan:
    """What the script does with the failed call."""

    kind: str  # "recheck" | "replay" | "none"
    call: Call | None = None
    checks: list[dict[str, Any]] = field(default_factory=list)
    unchanged: list[int] = field(default_factory=list)
    intact: list[int] = field(default_factory=list)
    returns: int | None = None
    why: str = ""  # why it cannot re-check (replay, none)
    raised: bool = False  # the failure is the call's exception

    @property
    def rank(self) -> int:
        """0: the script judges the call; 1: it replays it only; 2: it cannot rebuild it."""
        return 0 if self.kind == "recheck" or self.raised else 1 if self.kind == "replay" else 2


def _plan(trace: Trace | None, m: Measurement | None) -> Plan:
    calls = trace.calls if trace is not None else []
    if not calls:
        return Plan("none", why="no call of the implementation was traced in this process "
                                "(the test ran it in a child process, through a runtime "
                                "object, or not at all)")
    last = calls[-1]
    if last.why_not is not None:
        return Plan("none", why=f"the call took {last.why_not}")
    raised = m is None and last.raised is not None
    if last.recheck is not None:
        r = last.recheck
        return Plan("recheck", last, r.checks, r.unchanged, r.intact, r.returns, raised=raised)
    if m is not None and m.arrays is not None:
        found = trace.find(m.arrays[0])  # type: ignore[union-attr]
        if found is not None:
            call, where, at = found
            _, ref, bound = m.arrays
            target = f"out{at}" if where == "output" else f"T[{at}].grad"
            ref64 = np.array(ref, dtype=np.float64)
            check = {"name": m.name, "kind": "elementwise", "target": target,
                     "grad": where == "grad", "params": {},
                     "arrays": {"expected": torch.from_numpy(ref64),
                                "bound": torch.from_numpy(np.array(np.broadcast_to(
                                    np.asarray(bound, dtype=np.float64), ref64.shape)))}}
            return Plan("recheck", call, [check])
    what = f"'{m.name}'" if m is not None else "the failed check"
    why = last.why_no_recheck or (
        f"{what} is judged by the suite's own code, which this script does not carry (a "
        "statistical test against the law, requirements on reported facts, a property over "
        "several calls, an error a call must raise): rerun the test in the suite")
    return Plan("replay", last, why=why, raised=raised)


def _payload(plan: Plan) -> tuple[bytes, int]:
    """The script's tensors, saved and compressed; and their raw size in bytes."""
    call = plan.call
    if call is None:
        return b"", 0
    grads = any(c["grad"] for c in plan.checks)
    data: dict[str, Any] = {
        "inputs": call.tensors, "generators": call.generators, "layouts": call.layouts,
        "cotangents": list(call.cotangents.values()) if grads else [],
        "checks": [{"arrays": c["arrays"], "params": c["params"]} for c in plan.checks]}
    tensors = [*call.tensors, *call.generators, *data["cotangents"],
               *(a for c in plan.checks for a in c["arrays"].values())]
    raw = sum(t.numel() * t.element_size() for t in tensors)
    if raw > MAX_PAYLOAD:
        return b"", raw
    buf = io.BytesIO()
    torch.save(data, buf)
    return base64.b85encode(zlib.compress(buf.getvalue(), 6)), raw


def _lines(data: bytes, width: int = 100) -> str:
    text = data.decode()
    return "\n".join(text[i:i + width] for i in range(0, len(text), width))


@functools.cache
def _template() -> Any:
    env = Environment(loader=PackageLoader("conformance.report", "templates"),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                      keep_trailing_newline=True)
    env.filters["py"] = repr  # a Python literal
    return env.get_template("repro.py.j2")


_BEST: dict[tuple[str, tuple[str, str, str]], tuple[int, str]] = {}  # this process's candidates


def write_failure(directory: Path, record: Record, message: str,
                  measurement: Measurement | None, *, trace: Trace | None, impl: Impl | None,
                  state: RunState) -> Path | None:
    """Stage this failure's script if it is its group's best candidate in this process;
    returns the group's script path (written at the end of the run), None without an impl."""
    if impl is None:
        return None
    key = group_key({"area": record.area, "nodeid": record.nodeid, "impl": record.impl})
    final = directory / f"{Group(*key).slug}.py"
    plan = _plan(trace, measurement)
    best = _BEST.get((str(directory), key))
    if best is not None and best <= (plan.rank, record.nodeid):
        return final
    payload, raw = _payload(plan)
    if plan.call is not None and not payload:
        plan = Plan("none", why=f"its inputs and oracle arrays take {raw / 2**20:.1f} MiB, over "
                                f"the {MAX_PAYLOAD >> 20} MiB a script embeds")
        if best is not None and best <= (plan.rank, record.nodeid):
            return final
    rank = (plan.rank, record.nodeid)
    text = _render(record, message, measurement, plan, payload, impl, state, final.name)
    stage = staging_dir(directory)
    stage.mkdir(parents=True, exist_ok=True)
    name = key_name(key)
    (stage / f"{name}.py").write_text(text)
    (stage / f"{name}.json").write_text(json.dumps(
        {"key": list(key), "nodeid": record.nodeid, "rank": plan.rank, "kind": plan.kind}))
    _BEST[(str(directory), key)] = rank
    return final


def _render(record: Record, message: str, m: Measurement | None, plan: Plan, payload: bytes,
            impl: Impl, state: RunState, script_name: str) -> str:
    head = message.splitlines()[0]
    source, impl_file, foreign = _module_source(impl)
    module, attr = impl.spec.split(":", 1)
    call = plan.call
    return _template().render(
        tool_version=installed_version("torch-conformance") or "?",
        script_name=script_name, nodeid=record.nodeid, area=record.area,
        check_id=check_of(record.nodeid),
        check=m.name if m is not None else "(the call raised)" if plan.raised else "(an error)",
        verdict=head[:300], message_lines=message.splitlines()[1:],
        impl_name=impl.name, impl_spec=impl.spec, impl_origin=impl.origin,
        reproduce=record.reproduce, environment=_environment(state),
        impl_source=source, impl_file=Path(impl_file).name, impl_attr=attr,
        impl_imports=", ".join(foreign), impl_module=module,
        impl_attr_parts=attr.split("."), source_root=_source_root(impl, impl_file),
        device=state.device.torch_device, head=head, group_line=GROUP_LINE,
        kind=plan.kind, why=plan.why, raised=plan.raised,
        recorded_raise=(call.raised if call is not None else None) or "",
        checks=plan.checks, unchanged=plan.unchanged, intact=plan.intact,
        returns=plan.returns, grads=any(c["grad"] for c in plan.checks),
        kinds=sorted({c["kind"] for c in plan.checks}),
        grad_inputs=call.grad_inputs if call is not None else [],
        args_src=call.args_src if call is not None else "((), {})",
        output_paths=[p for p, _ in call.outputs] if call is not None else [],
        cotangent_paths=list(call.cotangents) if call is not None else [],
        data=_lines(payload), payload_kib=len(payload) / 1024)
