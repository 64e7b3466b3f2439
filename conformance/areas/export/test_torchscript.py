"""The TorchScript deprecation (2.10 and later): ``torch.jit.script``, ``trace``, ``save``
and ``load`` must warn, and the warning must name ``torch.export`` as the way forward. The
category and text are recorded; the matrix marks the versions that need not warn
(``unsupported``). Whether TorchScript still works is in the report's environment."""

from __future__ import annotations

import pytest

from conformance.harness.compare import exact
from conformance.harness.probes import torchscript

pytestmark = pytest.mark.area("export")


@pytest.mark.parametrize("entry", torchscript.ENTRY_POINTS)
def test_torchscript_deprecated(entry, record):
    found, error = torchscript.call(entry)
    record.note(warnings=found, error=error)
    record.require(exact("still runs", 1 if error else 0, 1, error or ""))
    record.require(exact("warns that it is deprecated", 0 if found else 1, 1,
                         f"torch.jit.{entry} emitted no warning naming it"))
    text = found[0]["message"]
    record.require(exact("names torch.export as the way forward",
                         0 if "torch.export" in text else 1, 1, repr(text)))
