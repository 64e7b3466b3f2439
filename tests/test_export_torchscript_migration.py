"""TorchScript's migration paths (impls/export_torchscript.py), plugged into the export area
with ``--impl`` (not shipped: the device matrix does not register them): one run, builtins
off, float32, a few round trips whose verdicts and facts are known (docs/areas/export.md,
"TorchScript migration", has the table for every model). Plus the converter's route from a
*scripted* module, which fails on the catalogue's RNN wrappers and the encoder layer."""

from __future__ import annotations

import re
import warnings

import pytest
import torch

from conformance.areas.export.catalogue import EXAMPLE, MODELS, build, make_inputs, to_tensors
from tests.conftest import SUITE

# CI's oldest leg runs it too: torch.export's APIs and what they keep change between releases
pytestmark = pytest.mark.torch_release

IMPLS = ("trace", "script", "to_export")
SEQ_GUARD = "AssertionError: Guard failed: x_1.size()[1] == 4"
# round trip -> the lengths it accepts (None: every size the area runs)
EXPECTED = {
    # a traced / scripted module runs at every size, exactly eager's numbers
    "torchscript.trace-float32-lstm-seq": None,
    "torchscript.script-float32-lstm-batch": None,
    # TS2EPConverter retraces with Dim.AUTO on every dim (torch/_export/converter.py,
    # retrace_as_exported_program: https://github.com/pytorch/pytorch/blob/v2.11.0/torch/_export/converter.py#L1517-L1526),
    # and torch.export's aten.lstm decomposition unrolls the time loop (torch/_decomp/
    # decompositions.py one_layer_lstm), so the length is specialised to the example's and
    # the program refuses every other length (a guard), never answers wrongly; the batch
    # stays dynamic (reported min 2: Dim.AUTO's 0/1 specialisation, yet batch 1 runs)
    "torchscript.to_export-float32-lstm-auto": {EXAMPLE[1]},
}


def test_torchscript_migration_round_trips(suite):
    test = SUITE / "export" / "test_export.py"
    run = suite(*(f"{test}::test_roundtrip[{case}]" for case in EXPECTED), "-n", "0", "-q",
                "-p", "no:randomly", "--no-builtins",
                *(f"--impl=export=impls.export_torchscript:{name}" for name in IMPLS))
    assert run.returncode == 0, run.output[-3000:]
    rows = {r["nodeid"].split("[", 1)[1][:-1]: r
            for rs in run.by_impl().values() for r in rs}
    assert sorted(rows) == sorted(EXPECTED), sorted(rows)
    for case, expected in EXPECTED.items():
        row = rows[case]
        assert row["outcome"] == "passed", (case, row.get("reason"))
        notes = row["notes"]
        assert notes["max_abs_vs_eager"] == 0.0, case
        accepted = [tuple(map(int, size.split("x"))) for size in notes["accepted"]]
        refused = [tuple(map(int, size.split("x"))) for size in notes["refused"]]
        assert len(accepted) + len(refused) >= 11, (case, notes)  # batches 1..64, lengths 1..257
        assert {b for b, _ in accepted} >= {1, 2, 3, 7, 64}, (case, notes)
        if expected is None:
            assert not refused, (case, notes)
        else:
            assert {s for _, s in accepted} == expected, (case, notes)
            assert len(refused) >= 6 and all(s not in expected for _, s in refused), notes
            assert set(notes["refused"].values()) == {SEQ_GUARD}, (case, notes)
    assert rows["torchscript.to_export-float32-lstm-auto"]["notes"]["dynamic_dims"] == {
        "x": {"0": [2, None]}, "h0": {"1": [2, None]}, "c0": {"1": [2, None]}}


# The converter's prim::If handling (torch 2.11 to 2.13, same lines): the scripted
# nn.RNN/LSTM/GRU forward's blocks fail in the sub-block's convert_graph_outputs, "Output
# ... not found" (https://github.com/pytorch/pytorch/blob/v2.11.0/torch/_export/converter.py#L1299),
# and the encoder layer's in convert_aten_append, which reads ``.op`` of a list
# (https://github.com/pytorch/pytorch/blob/v2.11.0/torch/_export/converter.py#L721);
# both wrapped as "TS2EPConverter failed for node prim::If" (converter.py#L1261). No
# upstream issue found for either; the trace route (torchscript.to_export) converts all.
SCRIPTED = {"lstm": (ValueError, r"Output \S+ not found"),
            "gru_bi": (ValueError, r"Output \S+ not found"),
            "encoder": (AttributeError, r"'list' object has no attribute 'op'")}


@pytest.mark.parametrize("name", list(SCRIPTED))
def test_converter_fails_on_scripted_module(name):
    from torch._export.converter import TS2EPConverter

    model = MODELS[name]
    module = build(model, torch.float32)
    args = tuple(to_tensors(make_inputs(model, *EXAMPLE, "float32"), torch.float32, "cpu"))
    with warnings.catch_warnings(), \
            pytest.raises(RuntimeError, match=r"^TS2EPConverter failed for node prim::If$") \
            as info:
        warnings.filterwarnings("ignore", message=r"`torch\.jit\.\w+` is deprecated",
                                category=DeprecationWarning)
        warnings.filterwarnings("ignore", message="Converting aten::append.t")  # the encoder's
        TS2EPConverter(torch.jit.script(module), args).convert()
    root: BaseException = info.value
    while root.__cause__ is not None:
        root = root.__cause__
    kind, pattern = SCRIPTED[name]
    assert isinstance(root, kind), repr(root)
    assert re.fullmatch(pattern, str(root)), repr(root)
