"""A GPU's identity for the report: index, name, memory, compute capability or arch, UUID,
PCI bus id, driver and VBIOS versions. torch's device properties first, then the vendor tool
(``nvidia-smi``, ``rocm-smi``) with a short timeout. Every probe is guarded: a field nobody
could read is None, and ``identity_unknown`` says why."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import torch

SMI_TIMEOUT = 10.0  # seconds per vendor-tool call
FIELDS = ("index", "name", "memory_bytes", "compute_capability", "arch", "uuid", "pci_bus_id",
          "driver_version", "vbios_version")
NVIDIA_QUERY = "uuid,pci.bus_id,driver_version,vbios_version"


def normalise_bus_id(text: str | None) -> str | None:
    """A PCI address as sysfs writes it, ``0000:18:00.0`` (nvidia-smi's ``00000000:18:00.0``
    and rocm-smi's ``0000:C1:00.0`` alike), or None."""
    if not text:
        return None
    match = re.fullmatch(r"(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})"
                         r"(?:\.([0-7]))?", text.strip())
    if match is None:
        return None
    domain, bus, dev, fn = match.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{fn or '0'}"


def _uuid(props: Any, hip: bool) -> str | None:
    raw = getattr(props, "uuid", None)
    if raw is None:
        return None
    text = str(raw).strip()
    if not text or set(text) <= {"0", "-"}:  # all zeros: the runtime did not say
        return None
    if not hip and re.fullmatch(r"[0-9a-fA-F-]{32,36}", text):
        text = f"GPU-{text}"  # as nvidia-smi and CUDA_VISIBLE_DEVICES spell it
    return text


def _bus_from_props(props: Any) -> str | None:
    try:
        bus = int(props.pci_bus_id)
        dev = int(getattr(props, "pci_device_id", 0))
        domain = int(getattr(props, "pci_domain_id", 0))
    except (AttributeError, TypeError, ValueError):
        return None
    return f"{domain:04x}:{bus:02x}:{dev:02x}.0"


def _from_props(kind: str, index: int, out: dict[str, Any], unknown: dict[str, str]) -> None:
    try:
        props = getattr(torch, kind).get_device_properties(index)
    except Exception as exc:
        for key in ("name", "memory_bytes", "uuid", "pci_bus_id"):
            unknown[key] = f"torch.{kind}.get_device_properties({index}) failed: " \
                           f"{type(exc).__name__}: {exc}"
        return
    hip = bool(torch.version.hip)
    out["name"] = getattr(props, "name", None)
    memory = getattr(props, "total_memory", None)
    out["memory_bytes"] = int(memory) if memory is not None else None
    if kind == "cuda" and not hip and hasattr(props, "major"):
        out["compute_capability"] = f"{props.major}.{props.minor}"
    if kind == "cuda" and hip:
        out["arch"] = getattr(props, "gcnArchName", None) or None
    out["uuid"] = _uuid(props, hip)
    out["pci_bus_id"] = _bus_from_props(props)
    if kind == "xpu":
        out["driver_version"] = getattr(props, "driver_version", None) or None
    for key in ("uuid", "pci_bus_id"):
        if out[key] is None:
            unknown[key] = f"torch {torch.__version__}'s device properties do not give it"


def _run(cmd: list[str]) -> tuple[str | None, str]:
    """(stdout, "") when ``cmd`` ran and exited 0, else (None, why)."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=SMI_TIMEOUT,
                              check=False)
    except FileNotFoundError:
        return None, f"{cmd[0]} is not installed (not on PATH)"
    except subprocess.TimeoutExpired:
        return None, f"{cmd[0]} did not answer within {SMI_TIMEOUT:g} s"
    except OSError as exc:
        return None, f"{cmd[0]} could not run: {exc}"
    if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        return None, f"{cmd[0]} exited with status {proc.returncode}: {last[:200]}"
    return proc.stdout, ""


def _nvidia(index: int, out: dict[str, Any], unknown: dict[str, str]) -> None:
    """nvidia-smi, selected by the UUID (or PCI address) torch gave: its indices follow PCI
    order and ignore CUDA_VISIBLE_DEVICES, torch's do not."""
    selector = out.get("uuid") or out.get("pci_bus_id")
    note = "" if selector else (" (selected by index: another GPU if CUDA_VISIBLE_DEVICES "
                                "or CUDA_DEVICE_ORDER reorders them)")
    text, why = _run(["nvidia-smi", f"--query-gpu={NVIDIA_QUERY}", "--format=csv,noheader",
                      "-i", str(selector or index)])
    rows = [line for line in (text or "").splitlines() if line.strip()]
    if text is not None and not rows:
        why = "nvidia-smi printed nothing"
    if why:
        for key in ("uuid", "pci_bus_id", "driver_version", "vbios_version"):
            if out.get(key) is None:
                unknown[key] = why
        return
    cells = [c.strip() for c in rows[0].split(",")]
    cells += [""] * (4 - len(cells))
    uuid, bus, driver, vbios = (None if c in ("", "[N/A]", "N/A") else c for c in cells[:4])
    if out.get("uuid") and uuid and uuid != out["uuid"]:
        unknown["uuid_mismatch"] = f"nvidia-smi says {uuid}, torch says {out['uuid']}"
    out["uuid"] = out.get("uuid") or uuid
    out["pci_bus_id"] = out.get("pci_bus_id") or normalise_bus_id(bus)
    out["driver_version"], out["vbios_version"] = driver, vbios
    for key in ("uuid", "pci_bus_id", "driver_version", "vbios_version"):
        if out[key] is None:
            unknown[key] = f"nvidia-smi gave no {key}"
        else:
            unknown.pop(key, None)
    if note:
        unknown["nvidia_smi_selection"] = note.strip(" ()")


def _find(record: dict[str, Any], *words: str) -> str | None:
    for key, value in record.items():
        if all(w in key.lower() for w in words) and str(value).strip():
            return str(value).strip()
    return None


def _rocm(index: int, out: dict[str, Any], unknown: dict[str, str]) -> None:
    """rocm-smi's JSON: the card with torch's PCI address (else card<index>, noted)."""
    text, why = _run(["rocm-smi", "--showvbios", "--showuniqueid", "--showbus",
                      "--showdriverversion", "--json"])
    try:
        data = json.loads(text) if text is not None else {}
    except ValueError:
        data, why = {}, "rocm-smi --json printed no JSON"
    cards = {k: v for k, v in data.items() if isinstance(v, dict) and k.startswith("card")}
    chosen = None
    for record in cards.values():
        if out.get("pci_bus_id") and \
                normalise_bus_id(_find(record, "pci", "bus")) == out["pci_bus_id"]:
            chosen = record
    if chosen is None and f"card{index}" in cards:
        chosen = cards[f"card{index}"]
        if out.get("pci_bus_id") is None:
            unknown["rocm_smi_selection"] = ("selected by index: another GPU if "
                                             "HIP_VISIBLE_DEVICES reorders them")
    system = data.get("system") if isinstance(data.get("system"), dict) else {}
    driver = _find(system, "driver", "version") or (chosen and _find(chosen, "driver"))
    out["driver_version"] = driver or None
    if chosen is not None:
        out["vbios_version"] = _find(chosen, "vbios")
        out["pci_bus_id"] = out.get("pci_bus_id") or normalise_bus_id(_find(chosen, "pci", "bus"))
        out["uuid"] = out.get("uuid") or _find(chosen, "unique", "id")
    elif not why:
        why = f"rocm-smi listed no card for device {index}"
    for key in ("uuid", "pci_bus_id", "driver_version", "vbios_version"):
        if out.get(key) is None:
            unknown[key] = why or f"rocm-smi gave no {key}"
        else:
            unknown.pop(key, None)


def identity(kind: str, index: int) -> dict[str, Any]:
    """Who GPU ``index`` of ``kind`` (cuda, also ROCm; xpu) is; never raises."""
    out: dict[str, Any] = dict.fromkeys(FIELDS)
    out["index"] = index
    unknown: dict[str, str] = {}
    try:
        _from_props(kind, index, out, unknown)
        if kind == "cuda":
            (_rocm if torch.version.hip else _nvidia)(index, out, unknown)
        else:
            for key in ("vbios_version", *(k for k in ("driver_version",) if not out[k])):
                unknown[key] = f"no vendor tool is queried for {kind} devices"
    except Exception as exc:  # the report is written whatever a probe does
        unknown["error"] = f"{type(exc).__name__}: {exc}"
    out["identity_unknown"] = dict(sorted(unknown.items()))
    return out
