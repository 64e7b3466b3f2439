"""TorchScript's deprecation, as facts: which warning each entry point emits, and whether
TorchScript still works in this build (recorded in the report's environment)."""

from __future__ import annotations

import io
import warnings
from typing import Any

import torch

ENTRY_POINTS = ("script", "trace", "save", "load")


class _AddOne(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


def _scripted() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.jit.script(_AddOne())


def call(entry: str) -> tuple[list[dict[str, str]], str | None]:
    """Call ``torch.jit.<entry>`` on a tiny module with every warning recorded:
    ([{category, message}], None) or (warnings, the error if it raised)."""
    error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if entry == "script":
                torch.jit.script(_AddOne())
            elif entry == "trace":
                torch.jit.trace(_AddOne(), torch.ones(2))
            elif entry == "save":
                torch.jit.save(_scripted(), io.BytesIO())
            elif entry == "load":
                buf = io.BytesIO()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    torch.jit.save(_scripted(), buf)
                buf.seek(0)
                torch.jit.load(buf)
            else:
                raise ValueError(f"unknown TorchScript entry point {entry!r}")
        except Exception as exc:
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    found = [{"category": w.category.__name__, "message": str(w.message)} for w in caught
             if f"torch.jit.{entry}" in str(w.message)]
    return found, error


def status() -> dict[str, Any]:
    """Whether a scripted module still runs and round-trips through save/load here."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            buf = io.BytesIO()
            torch.jit.save(_scripted(), buf)
            buf.seek(0)
            ok = bool(torch.equal(torch.jit.load(buf)(torch.zeros(2)), torch.ones(2)))
        return {"works": ok}
    except Exception as exc:
        return {"works": False, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
