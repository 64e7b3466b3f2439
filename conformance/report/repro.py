"""``--repro-dir DIR``: every failed check becomes a standalone script for an upstream report.

The script (torch and numpy only) loads the exact inputs of the failing call from a small
``.pt`` file next to it, calls the implementation (its module copied in when it imports only
torch, numpy and the standard library, else imported from its source tree) and judges the
result as the suite did:

- ``output`` / ``grad``: the failed check compared an output of the call, or an input's
  gradient after a backward with the recorded cotangents, elementwise against the oracle: the
  script recomputes it and prints the worst element, got / expected / bound, exit 1 if the
  failure reproduces;
- ``replay``: any other check (statistical, structural, an exception): the script replays
  the call with the same inputs and generator states and prints the outputs and the suite's
  recorded verdict (it does not re-evaluate the check);
- ``none``: the call could not be rebuilt (it ran in a child process, or took an argument
  the script cannot express); the script says why and prints the recorded verdict.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
import zlib
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

_ALLOWED_ROOTS = {"torch", "numpy", "__future__"} | set(sys.stdlib_module_names)


def file_stem(nodeid: str) -> str:
    """A file name for a test id: readable, unique (a CRC of the whole id), bounded."""
    tail = nodeid.split("/")[-1].replace(".py::", "__")
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", tail).strip("_")[:100]
    return f"{readable}-{zlib.crc32(nodeid.encode()):08x}"


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


def _locate(trace: Trace | None, m: Measurement | None
            ) -> tuple[Call | None, str, str, str | None]:
    """(the call, kind, where, why not) for the failed measurement."""
    calls = trace.calls if trace is not None else []
    if not calls:
        return None, "none", "", "no call of the implementation was traced in this process"
    if m is not None and m.arrays is not None:
        found = trace.find(m.arrays[0])
        if found is not None:
            return (*found, None)
    last = calls[-1]
    if last.why_not is not None:
        return None, "none", "", f"the call took {last.why_not}"
    return last, "replay", "", None


def write_failure(directory: Path, record: Record, message: str,
                  measurement: Measurement | None, *, trace: Trace | None, impl: Impl | None,
                  state: RunState) -> Path | None:
    """Write ``<stem>.py`` and ``<stem>.pt`` for one failure (a failed check's measurement,
    or None for an exception); returns the script's path."""
    if impl is None:
        return None
    nodeid, head = record.nodeid, message.splitlines()[0]
    check = measurement.name if measurement is not None else "(an exception)"
    call, kind, where, why_not = _locate(trace, measurement)
    directory.mkdir(parents=True, exist_ok=True)
    stem = file_stem(nodeid)
    data: dict[str, Any] = {"inputs": [], "generators": [], "cotangents": [], "layouts": {}}
    context: dict[str, Any] = {"kind": kind, "why_not": why_not, "grad_inputs": [],
                               "args_src": "((), {})", "output_paths": [],
                               "cotangent_paths": [], "output_path": "", "grad_index": 0}
    if call is not None:
        data["inputs"], data["generators"] = call.tensors, call.generators
        data["layouts"] = call.layouts
        context.update(grad_inputs=call.grad_inputs, args_src=call.args_src,
                       output_paths=[p for p, _ in call.outputs])
        if kind == "output":
            context["output_path"] = where
        elif kind == "grad":
            context["grad_index"] = int(where)
            context["cotangent_paths"] = list(call.cotangents)
            data["cotangents"] = list(call.cotangents.values())
        if kind in ("output", "grad"):
            _, ref, bound = measurement.arrays  # type: ignore[union-attr]
            data["expected"] = torch.from_numpy(np.array(ref, dtype=np.float64))
            data["bound"] = torch.from_numpy(
                np.array(np.broadcast_to(bound, np.shape(ref)), dtype=np.float64))
    source, impl_file, foreign = _module_source(impl)
    module, attr = impl.spec.split(":", 1)
    env = Environment(loader=PackageLoader("conformance.report", "templates"),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=False,
                      keep_trailing_newline=True)
    text = env.get_template("repro.py.j2").render(
        tool_version=installed_version("torch-conformance") or "?",
        data_name=f"{stem}.pt", script_name=f"{stem}.py", nodeid=nodeid, check=check,
        verdict=head[:300], message_lines=message.splitlines()[1:],
        impl_name=impl.name, impl_spec=impl.spec, impl_origin=impl.origin,
        reproduce=record.reproduce, environment=_environment(state),
        impl_source=source, impl_file=Path(impl_file).name, impl_attr=attr,
        impl_imports=", ".join(foreign), impl_module=module,
        impl_attr_parts=attr.split("."), source_root=_source_root(impl, impl_file),
        device=state.device.torch_device, head=head, **context)
    torch.save(data, directory / f"{stem}.pt")
    script = directory / f"{stem}.py"
    script.write_text(text)
    script.chmod(0o755)
    return script
