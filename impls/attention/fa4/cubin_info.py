"""Per-kernel resources read from a CUDA cubin (ELF), without the CUDA toolkit.

For each kernel (``.text.<name>`` section) it reports:
  * registers: EIATTR_REGCOUNT, an (symbol index, count) record in ``.nv.info`` (some
    toolchains put it in ``.nv.info.<name>`` instead: both are read);
  * static_shared_bytes: the size of ``.nv.shared.<name>`` (0 when absent). Dynamic shared
    memory is chosen at launch and is not in the cubin: callers add what they request;
  * frame_bytes / min_stack_bytes / max_stack_bytes: EIATTR_FRAME_SIZE, EIATTR_MIN_STACK_SIZE,
    EIATTR_MAX_STACK_SIZE (local memory per thread);
  * spill_stores / spill_loads: the cubin records no spill counts (ptxas prints them with -v
    only). We derive them only where that is sound: a kernel with no local memory at all
    (frame, min and max stack all 0) cannot spill, so both are 0; otherwise None (unknown);
  * max_threads: EIATTR_MAX_THREADS (from .maxntid), when present.

EIATTR record format: u8 format, u8 attribute, then for format 0x04 (sized) a u16 length and
that many bytes, for 0x03 (half) a u16 value, for 0x02 (byte) a u8 value, 0x01 nothing.
"""

from __future__ import annotations

import struct
from typing import Any

EIATTR_MAX_THREADS = 0x05
EIATTR_FRAME_SIZE = 0x11
EIATTR_MIN_STACK_SIZE = 0x12
EIATTR_MAX_STACK_SIZE = 0x23
EIATTR_REGCOUNT = 0x2F
_PER_SYMBOL = {EIATTR_REGCOUNT: "registers", EIATTR_FRAME_SIZE: "frame_bytes",
               EIATTR_MIN_STACK_SIZE: "min_stack_bytes", EIATTR_MAX_STACK_SIZE: "max_stack_bytes"}


def _sections(elf: bytes) -> tuple[list[dict[str, Any]], bool]:
    if elf[:4] != b"\x7fELF":
        raise ValueError("not an ELF file")
    is64 = elf[4] == 2
    end = "<" if elf[5] == 1 else ">"
    if is64:
        shoff, = struct.unpack_from(end + "Q", elf, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", elf, 0x3A)
        fmt = end + "IIQQQQIIQQ"
    else:
        shoff, = struct.unpack_from(end + "I", elf, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", elf, 0x2E)
        fmt = end + "IIIIIIIIII"
    secs = []
    for i in range(shnum):
        name, typ, _flags, _addr, off, size, link, info, _align, entsize = struct.unpack_from(
            fmt, elf, shoff + i * shentsize)
        secs.append({"name_off": name, "type": typ, "offset": off, "size": size, "link": link,
                     "info": info, "entsize": entsize})
    strtab = secs[shstrndx]
    for s in secs:
        s["name"] = _cstr(elf, strtab["offset"] + s["name_off"])
    return secs, is64


def _cstr(buf: bytes, off: int) -> str:
    return buf[off:buf.index(b"\0", off)].decode("utf-8", "replace")


def _symbols(elf: bytes, secs: list[dict[str, Any]], is64: bool) -> list[str]:
    symtab = next((s for s in secs if s["type"] == 2), None)  # SHT_SYMTAB
    if symtab is None:
        return []
    strtab = secs[symtab["link"]]
    size = 24 if is64 else 16
    names = []
    for i in range(symtab["size"] // size):
        name_off, = struct.unpack_from("<I", elf, symtab["offset"] + i * size)
        names.append(_cstr(elf, strtab["offset"] + name_off))
    return names


def _records(data: bytes):
    i = 0
    while i + 2 <= len(data):
        fmt, attr = data[i], data[i + 1]
        i += 2
        if fmt == 0x04:
            n, = struct.unpack_from("<H", data, i)
            yield attr, data[i + 2:i + 2 + n]
            i += 2 + n
        elif fmt == 0x03:
            yield attr, data[i:i + 2]
            i += 2
        elif fmt == 0x02:
            yield attr, data[i:i + 1]
            i += 1
        elif fmt == 0x01:
            yield attr, b""
        else:
            return  # unknown format: stop rather than misparse


def kernel_resources(cubin: bytes) -> dict[str, dict[str, Any]]:
    """{kernel name: {registers, static_shared_bytes, frame_bytes, ..., spill_*}}."""
    secs, is64 = _sections(cubin)
    syms = _symbols(cubin, secs, is64)
    out: dict[str, dict[str, Any]] = {}
    for s in secs:
        if s["name"].startswith(".text."):
            name = s["name"][len(".text."):]
            out[name] = {"registers": None, "static_shared_bytes": 0, "frame_bytes": None,
                         "min_stack_bytes": None, "max_stack_bytes": None, "max_threads": None}
    for s in secs:
        data = cubin[s["offset"]:s["offset"] + s["size"]]
        if s["name"].startswith(".nv.shared.") and s["name"][len(".nv.shared."):] in out:
            out[s["name"][len(".nv.shared."):]]["static_shared_bytes"] = s["size"]
        if not s["name"].startswith(".nv.info"):
            continue
        own = s["name"][len(".nv.info."):] if s["name"].startswith(".nv.info.") else None
        for attr, payload in _records(data):
            if attr in _PER_SYMBOL and len(payload) == 8:
                sym, value = struct.unpack("<II", payload)
                kname = syms[sym] if sym < len(syms) else own
                if kname in out:
                    out[kname][_PER_SYMBOL[attr]] = value
            elif attr == EIATTR_MAX_THREADS and own in out and len(payload) >= 4:
                out[own]["max_threads"] = list(struct.unpack_from("<III", payload)) \
                    if len(payload) >= 12 else struct.unpack_from("<I", payload)[0]
    for k in out.values():
        local = [k["frame_bytes"], k["min_stack_bytes"], k["max_stack_bytes"]]
        no_local = all(x == 0 for x in local if x is not None) and any(
            x is not None for x in local)
        k["spill_stores"] = 0 if no_local else None
        k["spill_loads"] = 0 if no_local else None
    return out


def main() -> None:
    import json
    import sys
    for path in sys.argv[1:]:
        with open(path, "rb") as f:
            print(path, json.dumps(kernel_resources(f.read()), indent=1))


if __name__ == "__main__":
    main()
