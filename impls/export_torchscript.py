"""TorchScript's migration as export round trips (area ``export``, the contract of
impls/export.py): what a user who still has TorchScript gets, on the way the release
notes ask for (TorchScript -> ``torch.export`` -> ExecuTorch).

- ``torchscript.trace``: ``torch.jit.trace`` -> ``torch.jit.save`` to a buffer ->
  ``torch.jit.load`` -> run the loaded module.
- ``torchscript.script``: the same with ``torch.jit.script``.
- ``torchscript.to_export``: trace, save, load, then torch's TorchScript -> ExportedProgram
  converter (``torch._export.converter.TS2EPConverter(ts_module, args).convert()``, the same
  in torch 2.11 to 2.13) -> ``.module()``. The converter takes no ``dynamic_shapes``: it
  retraces its FX graph with ``Dim.AUTO`` on every dim of every input
  (``retrace_as_exported_program``), so the dims asked for are not passed on; this path
  declares no ``dynamic.*`` feature (the area runs its ``static`` and ``auto`` variants) and
  reports the dims that stayed dynamic. It starts from the trace: the converter fails on
  a scripted RNN wrapper or encoder layer (their ``prim::If`` blocks;
  tests/test_export_torchscript_migration.py has the exact failures).

Traces are taken under ``torch.no_grad()``, as for inference: ``nn.TransformerEncoderLayer``
picks its fused fast path only without grad, and ``torch.jit.trace``'s own check re-traces
under ``no_grad`` (torch/jit/_trace.py ``_check_trace``), so a trace with grad enabled fails
that check ("Graphs differed across invocations"). A trace records the control flow and may
record sizes of the example: the area checks that the program refuses or is right at the
other sizes. TorchScript's deprecation warnings (checked by test_torchscript.py) are
expected here and silenced.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import warnings
from collections.abc import Iterator
from typing import Any

import torch

from impls.export import FEATURES, Program, _declare, dynamic_dims

_DEPRECATED = r"`torch\.jit\.\w+` is deprecated"


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_DEPRECATED, category=DeprecationWarning)
        yield


def _reloaded(scripted: torch.jit.ScriptModule) -> torch.jit.ScriptModule:
    """``torch.jit.save`` to a buffer and ``torch.jit.load`` it back (the file a user ships)."""
    buf = io.BytesIO()
    torch.jit.save(scripted, buf)
    buf.seek(0)
    return torch.jit.load(buf)


def _traced(module: torch.nn.Module, args: tuple) -> torch.jit.ScriptModule:
    with torch.no_grad():
        return torch.jit.trace(module, args)


def _run(scripted: torch.jit.ScriptModule) -> Any:
    def run(*inputs: torch.Tensor) -> Any:
        with _quiet():
            return scripted(*inputs)
    return run


def trace(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """``torch.jit.trace`` -> save -> load (``dynamic_shapes`` has no counterpart: a trace
    keeps whatever sizes it did not record as constants)."""
    with _quiet():
        loaded = _reloaded(_traced(module, args))
    return Program(_run(loaded), None)


def script(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """``torch.jit.script`` -> save -> load (a scripted module runs at any size)."""
    with _quiet():
        loaded = _reloaded(torch.jit.script(module))
    return Program(_run(loaded), None)


def to_export(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """``torch.jit.trace`` -> save -> load -> ``TS2EPConverter(...).convert()`` ->
    ``.module()``; the converter chooses the dynamic dims (``Dim.AUTO``, see the module
    docstring), reported as ``dynamic_dims``."""
    from torch._export.converter import TS2EPConverter

    with _quiet():
        loaded = _reloaded(_traced(module, args))
        ep = TS2EPConverter(loaded, args).convert()
    # the converter names the inputs after TorchScript's values (x_1, h0_1): report the dims
    # under the module's own input names, in order, so that the area holds it to them
    names = list(inspect.signature(module.forward).parameters)
    dims = dict(zip(names, dynamic_dims(ep).values(), strict=True))
    return Program(ep.module(), dims)


_GPU = ["cpu", "cuda", "rocm", "xpu"]
_declare(trace, "torchscript.trace", dtypes=["float32"], devices=_GPU, features=FEATURES)
_declare(script, "torchscript.script", dtypes=["float32"], devices=_GPU, features=FEATURES)
_declare(to_export, "torchscript.to_export", dtypes=["float32"], devices=_GPU, features=[])
