"""``--device=cuda:N``: parsing, validation and its one-line errors, every xdist worker on
GPU N, the reproduce line and the isolation / rank children carrying the index, and the
GPU's identity in the report's environment (torch.cuda and nvidia-smi / rocm-smi mocked)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from conformance.harness import gpu, probe
from conformance.harness.errors import ConfigError
from conformance.processes import ranks

pytestmark = pytest.mark.harness_only

ROOT = Path(__file__).resolve().parents[1]
UUID = "58389cd4-1b2c-3d4e-5f60-718293a4b5c6"


def _props(i: int) -> SimpleNamespace:
    return SimpleNamespace(name="NVIDIA H200", total_memory=150 << 30,
                           multi_processor_count=132, major=9, minor=0,
                           uuid=UUID[:-1] + str(i), pci_bus_id=0x18 + i, pci_device_id=0,
                           pci_domain_id=0)


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Two NVIDIA GPUs; returns the indices set_device was called with."""
    chosen: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties", _props)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv(probe.TORCHRUN_ENV, raising=False)
    monkeypatch.setattr(probe, "_package_tags", lambda: (set(), {}))
    return chosen


@pytest.mark.parametrize(("text", "parsed"), [
    ("auto", ("auto", None)), ("cpu", ("cpu", None)), ("cuda", ("cuda", None)),
    ("cuda:0", ("cuda", 0)), ("cuda:1", ("cuda", 1)), ("xpu:3", ("xpu", 3)),
])
def test_parse(text, parsed):
    assert probe.parse_device(text) == parsed


@pytest.mark.parametrize(("text", "message"), [
    ("tpu", "--device: unknown device 'tpu'"),
    ("cpu:0", "--device=cpu:0: cpu takes no device index (use --device=cpu"),
    ("mps:0", "mps takes no device index"),
    ("auto:1", "auto takes no device index"),
    ("cuda:", "--device=cuda:: the device index must be a whole number >= 0"),
    ("cuda:-1", "must be a whole number"),
    ("cuda:x", "e.g. --device=cuda:1"),
    ("cuda:1.0", "must be a whole number"),
])
def test_parse_errors_are_one_line(text, message):
    with pytest.raises(ConfigError) as err:
        probe.parse_device(text)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_an_index_pins_every_worker(fake_cuda, monkeypatch):
    info = probe.resolve_device("cuda:1", workers=4)
    assert (info.torch_device, info.index, info.pinned, info.spread) == ("cuda:1", 1, True, ())
    assert info.matrix_key == "cuda" and info.details["compute_capability"] == "9.0"
    for worker in ("gw0", "gw1", "gw2", "gw3"):  # every xdist worker on the same GPU
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        assert probe.resolve_device("cuda:1").torch_device == "cuda:1"
    assert fake_cuda == [1] * 5


def test_plain_cuda_is_device_0_and_spreads_xdist_workers(fake_cuda, monkeypatch):
    info = probe.resolve_device("cuda", workers=4)
    assert (info.torch_device, info.index, info.pinned, info.spread) == ("cuda:0", 0, False,
                                                                        (0, 1))
    assert probe.resolve_device("cuda").spread == ()  # one process: one GPU
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    assert probe.resolve_device("cuda").torch_device == "cuda:1"


def test_an_index_past_the_devices_is_a_usage_error(fake_cuda):
    with pytest.raises(ConfigError, match=r"^--device=cuda:2: this host has 2 cuda devices "
                                          r"\(indices 0-1; CUDA_VISIBLE_DEVICES"):
        probe.resolve_device("cuda:2")


def test_no_cuda_is_a_usage_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"^--device=cuda:1: no cuda device is available"):
        probe.resolve_device("cuda:1")


def test_torchrun_takes_no_index(fake_cuda, monkeypatch):
    monkeypatch.setenv(probe.TORCHRUN_ENV, "nccl,2")
    with pytest.raises(ConfigError, match="under torchrun each rank uses its LOCAL_RANK"):
        probe.resolve_device("cuda:1")


def test_reproduce_line_and_matrix_key_keep_the_index(fake_cuda):
    from conformance.harness.runstate import RunState

    opt = SimpleNamespace(conformance_profile="ci", device_matrix=None, device="cuda:1",
                          conformance_impl=[], no_builtins=False, conformance_seed=None,
                          conformance_report=None, dist="no")
    state = RunState.from_options(opt)
    assert state.device.matrix_key == "cuda"  # cuda:1 uses cuda's matrix entries
    assert state.repro_args()[0] == "--device=cuda:1"


def test_rank_children_start_from_the_runs_gpu(fake_cuda):
    assert [ranks._rank_device("cuda:1", r, "nccl") for r in range(3)] == \
        ["cuda:1", "cuda:0", "cuda:1"]
    assert {ranks._rank_device("cuda:1", r, "gloo") for r in range(3)} == {"cuda:1"}
    assert ranks._rank_device("cpu", 2, "gloo") == "cpu"


REAL_RUN = subprocess.run
SMI = ("nvidia-smi", "rocm-smi")


def _fake_smi(monkeypatch: pytest.MonkeyPatch, answer) -> None:
    """subprocess.run answers for the vendor tools (with a timeout); the rest runs."""
    def run(cmd, *args, **kwargs):
        if not (isinstance(cmd, list) and cmd[0] in SMI):
            return REAL_RUN(cmd, *args, **kwargs)
        assert 0 < kwargs["timeout"] <= 30
        return answer(cmd, kwargs["timeout"])
    monkeypatch.setattr(subprocess, "run", run)


def _smi(monkeypatch: pytest.MonkeyPatch, stdout: str, rc: int = 0,
         calls: list | None = None) -> None:
    def answer(cmd, timeout):
        if calls is not None:
            calls.append(cmd)
        return subprocess.CompletedProcess(cmd, rc, stdout, "")
    _fake_smi(monkeypatch, answer)


def test_identity_from_torch_and_nvidia_smi(fake_cuda, monkeypatch):
    calls: list = []
    _smi(monkeypatch, f"GPU-{UUID[:-1]}1, 00000000:19:00.0, 580.65.06, 96.00.AF.00.01\n",
         calls=calls)
    out = gpu.identity("cuda", 1)
    assert out["uuid"] == f"GPU-{UUID[:-1]}1" and out["pci_bus_id"] == "0000:19:00.0"
    assert (out["driver_version"], out["vbios_version"]) == ("580.65.06", "96.00.AF.00.01")
    assert out["compute_capability"] == "9.0" and out["memory_bytes"] == 150 << 30
    assert out["identity_unknown"] == {}
    # nvidia-smi is asked about torch's GPU by its UUID (its own indices ignore
    # CUDA_VISIBLE_DEVICES)
    assert calls[0][-2:] == ["-i", f"GPU-{UUID[:-1]}1"]


def test_identity_without_nvidia_smi_says_why(fake_cuda, monkeypatch):
    def missing(cmd, timeout):
        raise FileNotFoundError(cmd[0])
    _fake_smi(monkeypatch, missing)
    out = gpu.identity("cuda", 0)
    assert out["uuid"] == f"GPU-{UUID[:-1]}0"  # from torch still
    assert out["driver_version"] is None and out["vbios_version"] is None
    assert "nvidia-smi is not installed" in out["identity_unknown"]["vbios_version"]


def test_identity_with_a_hung_tool_and_old_torch(monkeypatch):
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i: SimpleNamespace(name="Tesla V100", total_memory=1, major=7,
                                                  minor=0))

    def hang(cmd, timeout):
        raise subprocess.TimeoutExpired(cmd, timeout)
    _fake_smi(monkeypatch, hang)
    out = gpu.identity("cuda", 0)
    assert out["uuid"] is None and "did not answer within" in out["identity_unknown"]["uuid"]


def test_identity_on_rocm_matches_the_card_by_pci_address(monkeypatch):
    monkeypatch.setattr(torch.version, "hip", "7.0.1")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: SimpleNamespace(
        name="AMD Instinct MI300X", total_memory=192 << 30, gcnArchName="gfx942:sramecc+",
        uuid="", pci_bus_id=0xC1, pci_device_id=0, pci_domain_id=0))
    _smi(monkeypatch, """{"card0": {"PCI Bus": "0000:11:00.0", "VBIOS version": "A",
        "Unique ID": "0x1111"}, "card1": {"PCI Bus": "0000:C1:00.0",
        "VBIOS version": "113-M3000100-102", "Unique ID": "0x18f68e602b8a790f"},
        "system": {"Driver version": "6.8.5"}}""")
    out = gpu.identity("cuda", 0)
    assert out["arch"] == "gfx942:sramecc+" and out["pci_bus_id"] == "0000:c1:00.0"
    assert (out["uuid"], out["vbios_version"], out["driver_version"]) == \
        ("0x18f68e602b8a790f", "113-M3000100-102", "6.8.5")


def test_environment_records_the_gpu(fake_cuda, monkeypatch):
    _smi(monkeypatch, "GPU-x, 00000000:18:00.0, 580.65.06, 96.00\n")
    env = probe.environment(probe.resolve_device("cuda:1"))
    dev = env["device"]
    assert (dev["torch_device"], dev["index"], dev["pinned"]) == ("cuda:1", 1, True)
    assert dev["uuid"] == f"GPU-{UUID[:-1]}1" and dev["pci_bus_id"] == "0000:19:00.0"
    assert dev["vbios_version"] == "96.00" and dev["name"] == "NVIDIA H200"
    assert "uuid_mismatch" in dev["identity_unknown"] and env["gpus"] is None
    spread = probe.environment(probe.resolve_device("cuda", workers=2))
    assert [g["index"] for g in spread["gpus"]] == [0, 1]


@pytest.mark.parametrize(("text", "bus"), [
    ("00000000:18:00.0", "0000:18:00.0"), ("0000:C1:00.0", "0000:c1:00.0"),
    ("18:00.0", "0000:18:00.0"), ("garbage", None), ("", None)])
def test_bus_ids_are_normalised(text, bus):
    assert gpu.normalise_bus_id(text) == bus


def test_pytest_refuses_a_bad_index_with_exit_4(tmp_path):
    """End to end: pytest's usage error (one line, exit 4) for cpu:0 and, on a machine with
    no GPU, for cuda:1."""
    cases = [("cpu:0", "cpu takes no device index")]
    if not torch.cuda.is_available():
        cases.append(("cuda:1", "no cuda device is available"))
    for device, text in cases:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                               f"--device={device}", "--collect-only", "-q",
                               "conformance/areas/special"],
                              capture_output=True, text=True, check=False, timeout=120,
                              cwd=ROOT)
        assert proc.returncode == 4, proc.stdout + proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR")]
        assert len(errors) == 1 and text in errors[0], proc.stderr


def test_the_gpu_fields_are_in_the_report_schema(fake_cuda, monkeypatch):
    import json

    import jsonschema

    schema = json.loads((ROOT / "docs" / "report.schema.json").read_text())
    section = schema["properties"]["environment"]
    _smi(monkeypatch, "GPU-x, 00000000:18:00.0, 580.65.06, 96.00\n")
    for env in (probe.environment(probe.resolve_device("cuda:1")),
                probe.environment(probe.resolve_device("cuda", workers=2))):
        jsonschema.validate(env, section)
    assert {"index", "uuid", "pci_bus_id", "driver_version", "vbios_version"} <= \
        set(section["properties"]["device"]["properties"])
    bad = probe.environment(probe.resolve_device("cuda:1"))
    bad["device"]["index"] = -1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, section)
