"""Regression cases of the export area from real bugs (each test names its source).

- pytorch#155309: exporting an LSTM moved to the device (``flatten_parameters`` ran) failed
  on GPUs; fixed in 2.11. Here: export on the run's device after ``.to(device)``, compare.
- The while-loop decomposition's dispatch cache (found by this suite): once aten.lstm ran in
  a process, entering ``register_lstm_while_loop_decomposition()`` has no effect (the patch
  sets ``py_kernels`` directly and the op's dispatch cache keeps the old kernel), so a
  second export with a dynamic length specialises it. impls/export.py clears the cache.
- pytorch#112044: packed sequences in export: either a correct program or a clear error at
  export time, never a program that answers wrongly.
The catalogue's round trips cover pytorch#115092 / executorch#5176 (LSTM with dynamic
shapes), #140845 (exported LSTM through AOTInductor) and executorch#18487 (embedding +
LSTM lowered with a dynamic length).
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.export import Dim

from conformance.harness.compare import exact

pytestmark = pytest.mark.area("export")


class _LSTM(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = torch.nn.LSTM(4, 6, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]


def _model(device) -> torch.nn.Module:
    torch.manual_seed(0)
    return _LSTM().to(device).eval()


def test_lstm_export_on_device(device, record):
    """pytorch#155309: export an LSTM after .to(device), run it there, compare to eager."""
    m = _model(device)
    x = torch.randn(2, 5, 4, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(m, (x,))
    got, want = ep.module()(x), m(x)
    record.require(exact("exported program equals eager on the device",
                         int((got != want).sum()), want.numel()))


def test_while_loop_patch_after_previous_export(device, record):
    """The patch must take effect although aten.lstm already ran in this process."""
    from torch.export import _patches

    m, x = _model(device), torch.randn(2, 5, 4, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.export.export(m, (x,))  # aten.lstm dispatched: its cache now holds a kernel
        try:
            with _patches.register_lstm_while_loop_decomposition():
                torch.export.export(m, (x,), dynamic_shapes=({1: Dim("seq", min=1, max=64)},))
            error = ""
        except Exception as exc:
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    record.require(exact("dynamic length after a previous export", 1 if error else 0, 1, error))


class _Packed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = torch.nn.LSTM(4, 6, batch_first=True)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                         enforce_sorted=False)
        out, _ = self.rnn(packed)
        return torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True,
                                                      total_length=x.shape[1])[0]


def test_packed_sequence_export(record):
    """pytorch#112044: a program from a packed-sequence model must equal eager (here on the
    CPU, where pack_padded_sequence wants its lengths) or export must refuse it."""
    torch.manual_seed(0)
    m = _Packed().eval()
    x, lengths = torch.randn(3, 5, 4), torch.tensor([5, 2, 4])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ep = torch.export.export(m, (x, lengths))
        except Exception as exc:
            record.note(export="refused", error=f"{type(exc).__name__}: {str(exc)[:200]}")
            return
    other = torch.tensor([3, 5, 1])
    got, want = ep.module()(x, other), m(x, other)
    record.note(export="accepted")
    record.require(exact("packed program equals eager at other lengths",
                         int((got - want).abs().gt(1e-6).sum()), want.numel()))
