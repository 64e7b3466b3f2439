"""Scalar fp32 helpers for the sm100 forward, written as explicit PTX so that the rounding of
every step is the one spec.py states (no contraction of mul+add into FMA by the compiler).

- ``exp2_hw``: hardware ``ex2.approx.ftz.f32`` (spec fwd 5, most columns; also alpha).
- ``exp2_sw``: the software exp2 of spec.py (cubic polynomial + exponent add), fwd 5.
- ``fma_rn``, ``mul_rn``, ``add_rn``, ``sub_rn``, ``div_rn``: IEEE round-to-nearest ops.
- ``tcgen05_fence_before`` / ``tcgen05_fence_after``: tcgen05 ordering around thread syncs.
"""

from __future__ import annotations

import struct

import cutlass
from cutlass._mlir.dialects import llvm, nvvm
from cutlass.cutlass_dsl import T, dsl_user_op

from impls.attention.fa4.spec import EXP2_POLY


def _hex_f32(value: float) -> str:
    """PTX literal of the fp32 rounding of ``value`` (0fXXXXXXXX)."""
    return f"0f{struct.unpack('<I', struct.pack('<f', value))[0]:08X}"


_C0, _C1, _C2, _C3 = (_hex_f32(c) for c in EXP2_POLY)
assert _C0 == "0f3F800000", "spec: the polynomial's constant term is 1"

# spec "Software exp2": y = max(y, -127); j = floor(y); f = y - j;
# p = fma(fma(fma(C3, f, C2), f, C1), f, 1); result = bits(p) + (j << 23).
_EXP2_SW_PTX = (
    "{\n\t.reg .f32 y, j, f, p;\n\t.reg .s32 ji, pi;\n\t"
    "max.f32 y, $1, 0fC2FE0000;\n\t"  # -127.0
    "cvt.rmi.f32.f32 j, y;\n\t"  # floor
    "sub.rn.f32 f, y, j;\n\t"  # exact: f in [0, 1)
    f"fma.rn.f32 p, {_C3}, f, {_C2};\n\t"
    f"fma.rn.f32 p, p, f, {_C1};\n\t"
    f"fma.rn.f32 p, p, f, {_C0};\n\t"
    "cvt.rzi.s32.f32 ji, j;\n\t"
    "shl.b32 ji, ji, 23;\n\t"
    "mov.b32 pi, p;\n\t"
    "add.s32 pi, pi, ji;\n\t"
    "mov.b32 $0, pi;\n\t}\n"
)


def _asm(text: str, constraints: str, *args: cutlass.Float32, loc=None, ip=None) -> cutlass.Float32:
    operands = [cutlass.Float32(a).ir_value(loc=loc, ip=ip) for a in args]
    return cutlass.Float32(
        llvm.inline_asm(T.f32(), operands, text, constraints, has_side_effects=False,
                        is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT,
                        loc=loc, ip=ip)
    )


@dsl_user_op
def exp2_sw(y: cutlass.Float32, *, loc=None, ip=None) -> cutlass.Float32:
    """spec "Software exp2" (sm100): cubic minimax polynomial on the fraction, exponent add."""
    return _asm(_EXP2_SW_PTX, "=f,f", y, loc=loc, ip=ip)


@dsl_user_op
def exp2_hw(y: cutlass.Float32, *, loc=None, ip=None) -> cutlass.Float32:
    """Hardware exp2 (MUFU): ex2.approx.ftz.f32; exp2(-inf) = 0."""
    return _asm("ex2.approx.ftz.f32 $0, $1;", "=f,f", y, loc=loc, ip=ip)


@dsl_user_op
def fma_rn(a, b, c, *, loc=None, ip=None) -> cutlass.Float32:
    """fp32 fused multiply-add, round to nearest even."""
    return _asm("fma.rn.f32 $0, $1, $2, $3;", "=f,f,f,f", a, b, c, loc=loc, ip=ip)


@dsl_user_op
def mul_rn(a, b, *, loc=None, ip=None) -> cutlass.Float32:
    return _asm("mul.rn.f32 $0, $1, $2;", "=f,f,f", a, b, loc=loc, ip=ip)


@dsl_user_op
def add_rn(a, b, *, loc=None, ip=None) -> cutlass.Float32:
    return _asm("add.rn.f32 $0, $1, $2;", "=f,f,f", a, b, loc=loc, ip=ip)


@dsl_user_op
def sub_rn(a, b, *, loc=None, ip=None) -> cutlass.Float32:
    return _asm("sub.rn.f32 $0, $1, $2;", "=f,f,f", a, b, loc=loc, ip=ip)


@dsl_user_op
def div_rn(a, b, *, loc=None, ip=None) -> cutlass.Float32:
    """IEEE fp32 division (div.rn.f32)."""
    return _asm("div.rn.f32 $0, $1, $2;", "=f,f,f", a, b, loc=loc, ip=ip)


@dsl_user_op
def tcgen05_fence_before(*, loc=None, ip=None) -> None:
    """tcgen05.fence::before_thread_sync: order this thread's prior tcgen05 ops (ld/st/mma)
    before a following thread synchronisation (mbarrier arrive, named barrier)."""
    nvvm.tcgen05_fence(nvvm.Tcgen05FenceKind.BEFORE_THREAD_SYNC, loc=loc, ip=ip)


@dsl_user_op
def tcgen05_fence_after(*, loc=None, ip=None) -> None:
    """tcgen05.fence::after_thread_sync: order following tcgen05 ops after a preceding thread
    synchronisation (mbarrier wait, named barrier)."""
    nvvm.tcgen05_fence(nvvm.Tcgen05FenceKind.AFTER_THREAD_SYNC, loc=loc, ip=ip)
