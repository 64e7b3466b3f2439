"""Indexing checks: valid indices against the oracle, invalid indices must raise.

Valid cases: the result equals the oracle exactly (a position written more than once by a
non-accumulating op may hold any of its written values); accumulating floating ops are held
to a forward-error bound that certifies accumulation in the operand's dtype (or wider):
sum of m terms ``gamma(m - 1 + p) * sum|terms|`` (p = 1 where each term is a product, as
with per-sample or class weights), mean ``gamma(m + p) * sum|terms| / m``, product
``gamma(m - 1) * |result|``, gamma(k) = k u / (1 - k u) with u the dtype's unit roundoff,
plus ``2^-53 |result|`` (the oracle's exact result rounded to float64);
cross_entropy adds its log-softmax, computed with float32 (float64 for float64)
accumulation: ``(C + 4) u_acc (1 + |max| + max|x - max|) + 3 u (|x_t - max| + log-sum +
|max|)`` per term (``_log_softmax_bound``). Max,
min, copies and integer results are exact. Operands are views in guarded storage: no
element outside them may change.

Invalid cases (``invalid_case``, run in the test process or in an isolated child): the op
must raise IndexError / RuntimeError (torch.AcceleratorError is one) at the call or no
later than the next synchronisation; the result dict says where it surfaced, what the
message was, whether a guard changed, and whether the device still computes a valid case
correctly afterwards.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from conformance.areas.indexing.cases import Case, Params
from conformance.areas.indexing.memory import Guarded, materialize
from conformance.areas.indexing.ops import INVALID_SHAPE, SPECS, TIER_KINDS, OpSpec, corrupt
from conformance.areas.indexing.returned import what_came_back
from conformance.harness import recheck
from conformance.harness.tensors import exact_numpy
from oracles import indexing as oracle

UNIT_ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24,
                 "float64": 2.0**-53}


def known_cpu_bug(op: str, params: Params, dtype: torch.dtype) -> str | None:
    """A configuration of a known CPU bug that a deterministic regression case covers (and
    the matrix lists as an expected failure), or None. The random valid cases leave it to
    that case, so that a fresh seed does not fail on a known bug."""
    shape = tuple(params["shape"])
    if (op == "index_reduce_" and params["reduce"] == "prod"
            and dtype in (torch.float16, torch.bfloat16) and len(shape) >= 2
            and int(np.prod(shape)) // max(shape[params["dim"] % len(shape)], 1) == 1
            and params["k"] >= 2 and shape[params["dim"] % len(shape)] > 0):
        return "test_regressions.py::TestIndexReduceValid::test_prod_unit_slices"
    return None


def gamma(k: np.ndarray | int, u: float) -> np.ndarray:
    k = np.asarray(k, dtype=np.float64)
    return k * u / (1 - k * u)


def sync(device: torch.device | str) -> None:
    if torch.device(device).type != "cpu":
        torch.accelerator.synchronize()


def _result_array(spec: OpSpec, views: dict[str, torch.Tensor], result: Any) -> Any:
    return views["x"] if spec.writes else result


def bound(spec: OpSpec, exp: oracle.Expected, inputs: dict[str, np.ndarray],
          case: Case, dtype: str) -> np.ndarray | None:
    """The per-element error bound, or None for an exact comparison."""
    u = UNIT_ROUNDOFF.get(dtype)
    if u is None or exp.reduce in ("assign", "amax", "amin"):
        return None
    m = exp.count.astype(np.float64)
    products = int((case.op in ("nll_loss", "cross_entropy") and "weight" in inputs)
                   or "per_sample_weights" in inputs)
    if case.op in ("nll_loss", "cross_entropy") and exp.reduce == "mean":
        denom = exp.weight_sum or 1.0
        b = 2 * gamma(m + 2 + products, u) * exp.abs_sum / abs(denom)
    elif exp.reduce == "sum":
        b = gamma(np.maximum(m - 1, 0) + products, u) * exp.abs_sum
    elif exp.reduce == "mean":
        b = gamma(m + products, u) * exp.abs_sum / np.maximum(m, 1)
    else:  # prod
        b = gamma(np.maximum(m - 1, 0), u) * exp.abs_sum
    if case.op == "cross_entropy":
        b = b + _log_softmax_bound(inputs, case, exp, dtype)
    # the oracle's result is the exact value rounded once to float64
    return np.asarray(b + 2.0**-53 * np.abs(np.asarray(exp.value)), dtype=np.float64)


def _log_softmax_bound(inputs: dict[str, np.ndarray], case: Case, exp: oracle.Expected,
                       dtype: str) -> np.ndarray:
    """Per target: the sum-of-exponentials error with float32 (float64) accumulation,
    (C + 4) u_acc (1 + |max| + max|x - max|), plus three roundings to the dtype of
    |x_t - max| + log-sum + |max| (x_t - max and the log-sum, or lse = max + log-sum, each
    rounded; their difference; its product with the class weight)."""
    x = inputs["x"]
    u = UNIT_ROUNDOFF[dtype]
    u_acc = UNIT_ROUNDOFF["float64" if dtype == "float64" else "float32"]
    classes = x.shape[1]
    top = x.max(axis=1, keepdims=True)
    spread = (top - x).max(axis=1)
    log_sum = np.log(np.exp(x - top).sum(axis=1))
    target = inputs["target"]
    keep = target != case.scalars["ignore_index"]
    safe = np.where(keep, target, 0)
    shifted = np.take_along_axis(top - x, safe[:, None], axis=1)[:, 0]
    w = inputs["weight"][safe] if "weight" in inputs else np.ones(safe.shape)
    per = np.where(keep, w * ((classes + 4) * u_acc * (1 + np.abs(top[:, 0]) + spread)
                              + 3 * u * (shifted + log_sum + np.abs(top[:, 0]))), 0.0)
    if case.scalars["reduction"] == "none":
        return per
    total = float(per.sum())
    if case.scalars["reduction"] == "mean":
        total /= abs(exp.weight_sum or 1.0)
    return np.asarray(total)


def compare(spec: OpSpec, case: Case, inputs: dict[str, np.ndarray], got: np.ndarray,
            dtype: str) -> tuple[list[str], float | None]:
    """Problems of ``got`` against the oracle (empty: correct) and the worst error/bound
    (None for an exact comparison)."""
    exp = spec.oracle(inputs, case.scalars, not dtype.startswith(("float", "bfloat")))
    want = np.asarray(exp.value)
    if dtype == "bool":  # a value written into a bool tensor is its truth
        want = (want != 0).astype(np.float64)
        exp.choices = {k: tuple(float(v != 0) for v in opts)
                       for k, opts in (exp.choices or {}).items()} or None
    if got.shape != want.shape:
        return [f"shape {got.shape} != {want.shape}"], None
    b = bound(spec, exp, inputs, case, dtype)
    if b is None:
        bad = np.array(got != want)  # an array even for 0-d results (item assignment)
        for pos, options in (exp.choices or {}).items():
            flat = np.unravel_index(pos, want.shape) if want.shape else ()
            bad[flat] = got[flat] not in options
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            alts = (exp.choices or {}).get(int(np.ravel_multi_index(at, want.shape))
                                           if want.shape else 0)
            return [f"{int(bad.sum())} of {want.size} elements differ; first at {at}: got "
                    f"{got[at]!r}, expected {want[at]!r}" +
                    (f" (any of {list(alts)})" if alts else "")], None
        return [], None
    with np.errstate(invalid="ignore"):
        err = np.where(np.isnan(got) & np.isnan(want), 0.0, np.abs(got - want))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(err == 0, 0.0, err / b)
    ratio = np.where(np.isnan(ratio), np.inf, ratio)
    worst = float(ratio.max(initial=0.0))
    if worst > 1:
        at = np.unravel_index(int(np.argmax(ratio)), want.shape) if want.shape else ()
        return [f"error {float(err[at]):.3g} exceeds the bound {float(b[at]):.3g} at "
                f"{tuple(int(i) for i in at)}: got {float(got[at])!r}, expected "
                f"{float(want[at])!r}"], worst
    return [], worst


def _expect_valid(spec: OpSpec, case: Case, inputs: dict[str, np.ndarray],
                  views: dict[str, torch.Tensor], dtype: torch.dtype) -> None:
    """--repro-dir: the valid case's checks (structure, values, no write outside the
    operands, inputs unchanged) for the standalone script (conformance/harness/recheck.py)."""
    dname = str(dtype).removeprefix("torch.")
    exp = spec.oracle(inputs, case.scalars, not dname.startswith(("float", "bfloat")))
    want = np.asarray(exp.value)
    want = want.astype(np.complex128 if np.iscomplexobj(want) else np.float64)
    if dname == "bool":  # a value written into a bool tensor is its truth
        want = (want != 0).astype(np.float64)
        exp.choices = {k: tuple(float(v != 0) for v in opts)
                       for k, opts in (exp.choices or {}).items()} or None
    b = bound(spec, exp, inputs, case, dname)
    target = recheck.written(views["x"]) if spec.writes else recheck.output()
    want_dtype = getattr(torch, spec.out_dtype) if spec.out_dtype else dtype
    if b is None:  # exact; where several writes race, any of their values
        choices = exp.choices or {}
        alts = []
        for j in range(max([len(v) for v in choices.values()] or [1])):
            alt = want.copy()
            for pos, options in choices.items():
                alt.reshape(-1)[pos] = options[min(j, len(options) - 1)]
            alts.append(alt)
        check = recheck.one_of("result structure; values equal the oracle's", target,
                               np.stack(alts), dtype=want_dtype, device=True)
    else:
        check = recheck.within_bound("result structure; values within the accumulation bound",
                                     target, want, b, dtype=want_dtype, device=True)
    recheck.expect_next(
        check, unchanged=tuple(v for k, v in views.items() if not (spec.writes and k == "x")),
        intact=tuple(views.values()), returns=views["x"] if spec.writes else None)


def run_valid(fn: Any, spec: OpSpec, case: Case, dtype: torch.dtype, index_dtype: str,
              layout: str, device: torch.device | str) -> dict[str, Any]:
    """Run one valid case; the problems found, by kind, and the worst error/bound."""
    dname = str(dtype).removeprefix("torch.")
    g = materialize(case, dtype, index_dtype, device, layout)
    views = {k: v.view for k, v in g.items()}
    inputs = {k: exact_numpy(v).copy() for k, v in views.items()}  # numpy() may share memory
    if recheck.tracing():
        _expect_valid(spec, case, inputs, views, dtype)
    result = spec.call(fn, views, case.scalars)
    sync(device)
    out: dict[str, Any] = {"structure": [], "values": [], "guards": [], "inputs": [],
                           "ratio": None}
    target = _result_array(spec, views, result)
    if not isinstance(result, torch.Tensor):
        out["structure"].append(f"returned {type(result).__name__}, not a tensor")
        return out
    if spec.writes and (result.data_ptr(), result.shape, result.stride()) != (
            target.data_ptr(), target.shape, target.stride()):
        out["structure"].append("an in-place op must return self")
    want_dtype = getattr(torch, spec.out_dtype) if spec.out_dtype else dtype
    if result.dtype != want_dtype:
        out["structure"].append(f"dtype {result.dtype} != {want_dtype}")
    if result.device.type != torch.device(device).type:
        out["structure"].append(f"result on {result.device}, operands on {device}")
    if result.dtype == torch.bool and target.numel() and \
            int(target.view(torch.uint8).max()) > 1:  # reads as True, is not torch's True
        out["structure"].append("a bool result holds bytes other than 0 and 1 (a value "
                                "stored as its raw integer, not its truth)")
    if not out["structure"]:
        out["values"], out["ratio"] = compare(spec, case, inputs, exact_numpy(target), dname)
    out["guards"] = [d for gd in g.values() for c, d in [gd.intact()] if c]
    out["inputs"] = _changed_inputs(spec, g, inputs)
    return out


def _changed_inputs(spec: OpSpec, g: dict[str, Guarded], before: dict[str, np.ndarray]) -> list:
    changed = []
    for name, gd in g.items():
        if spec.writes and name == "x":
            continue
        now = exact_numpy(gd.view)
        if now.shape != before[name].shape or not np.array_equal(now, before[name]):
            changed.append(f"input {name} was modified")
    return changed


def _classify(exc: BaseException) -> dict[str, Any]:
    mro = [f"{c.__module__}.{c.__qualname__}" for c in type(exc).__mro__]
    return {"exc_type": mro[0], "exc_mro": mro, "message": str(exc)}


def invalid_case(op: str, params: Params, kind: str, dtype: str, index_dtype: str,
                 layout: str, impl_spec: str, device: str,
                 arena: str | None = None) -> dict[str, Any]:
    """Run ``op`` with one invalid index of ``kind`` and report what happened (JSON-able).
    A module-level function of literal arguments: it runs the same in the test process, in
    an isolated child and in the foreground (``torch-conformance isolate``); ``arena``: a
    folder the parent reads the guards from (memory.py)."""
    case = SPECS[op].build(params)
    bad = corrupt(case, kind, index_dtype, np.random.default_rng([params["seed"], 1]))
    if bad is None:
        return {"applies": False}
    good = case
    # the twin: indexing nothing (a size-0 dim), small (the large tier: as good a witness
    # that the device still works), without max_norm (it renorms the weight in place)
    if params.get("into_empty") or kind in TIER_KINDS or params.get("max_norm"):
        twin = {**params, "into_empty": False, "max_norm": False}
        if kind in TIER_KINDS:
            twin.update(shape=INVALID_SHAPE, k=3)
        good = SPECS[op].build(twin)
    return run_invalid(impl_spec, bad, good, dtype, index_dtype, layout, device,
                       arena=arena)


def invalid_batch(fn: str, cases: list[tuple], arena: str) -> int:
    """Run the invalid cases ``fn(*args, arena=arena/i)`` in order (in one isolated child),
    each one's JSON result written to ``arena/i/result.json`` as soon as it ends, so that
    a crash or hang of a later case loses none of them; how many ran."""
    module, _, qualname = fn.partition(":")
    case: Any = importlib.import_module(module)
    for part in qualname.split("."):
        case = getattr(case, part)
    for i, args in enumerate(cases):
        folder = Path(arena, str(i))
        folder.mkdir()
        res = case(*args, arena=str(folder))
        (folder / "result.json").write_text(json.dumps(res))
    return len(cases)


def literal_case(op: str, arrays: dict[str, tuple[str, list]], scalars: dict[str, Any],
                 index: str, n: int, bad_value: int, at: int, dtype: str, index_dtype: str,
                 layout: str, impl_spec: str, device: str,
                 compiled: bool = False, arena: str | None = None) -> dict[str, Any]:
    """``invalid_case`` for a case given literally (the regression cases): entry ``at`` of
    array ``index`` is replaced by ``bad_value``; ``compiled``: the implementation under
    ``torch.compile`` (run it in a fresh child: Inductor's verdict depends on what it
    compiled before)."""
    good = Case(op, {k: (role, np.asarray(v)) for k, (role, v) in arrays.items()},
                dict(scalars), index, n, "x" if SPECS[op].writes else None)
    bad_arrays = {k: (role, v.copy()) for k, (role, v) in good.arrays.items()}
    bad_arrays[index][1].reshape(-1)[at] = bad_value
    bad = Case(op, bad_arrays, dict(scalars), index, n, good.dest)
    return run_invalid(impl_spec, bad, good, dtype, index_dtype, layout, device, compiled,
                       arena)


def run_invalid(impl_spec: str, bad: Case, good: Case, dtype: str, index_dtype: str,
                layout: str, device: str, compiled: bool = False,
                arena: str | None = None) -> dict[str, Any]:
    """Run the invalid case ``bad``, then its valid twin ``good`` (is the device still
    correct?); where the error surfaced, the exception, the guards, and what a silent
    call returned."""
    from conformance.harness.registry import load_object

    fn = load_object(impl_spec, f"--impl indexing.{bad.op}")
    if compiled:
        fn = torch.compile(fn, dynamic=False)
    spec, tdtype = SPECS[bad.op], getattr(torch, dtype)
    out: dict[str, Any] = {"applies": True, "surfaced": "never", "bad": _bad_summary(bad)}
    g = materialize(bad, tdtype, index_dtype, device, layout, arena)
    views = {k: v.view for k, v in g.items()}
    result = None
    try:
        result = spec.call(fn, views, bad.scalars)
    except Exception as exc:
        out.update(surfaced="call", **_classify(exc))
    if out["surfaced"] == "never":
        try:
            sync(device)
            if isinstance(result, torch.Tensor):
                result.cpu()
        except Exception as exc:
            out.update(surfaced="sync", **_classify(exc))
    if out["surfaced"] == "never":
        out["returned"] = _returned(spec, bad, views, result, dtype)
    try:
        out["guards"] = [d for gd in g.values() for c, d in [gd.intact()] if c]
        out["guards_checked"] = True
    except Exception as exc:
        out.update(guards=[], guards_checked=False, guards_error=str(exc).split("\n")[0])
    out.update(_after(fn, spec, good, tdtype, index_dtype, layout, device))
    return out


def _returned(spec: OpSpec, bad: Case, views: dict[str, torch.Tensor], result: Any,
              dtype: str) -> str:
    """What the silent call gave back, in words (returned.py)."""
    target = views["x"] if spec.writes else result
    if not isinstance(target, torch.Tensor):
        return f"a {type(result).__name__}, not a tensor"
    try:
        got = exact_numpy(target)
    except Exception as exc:
        return f"a result that cannot be read back ({type(exc).__name__}: {exc})"[:300]
    return what_came_back(spec.oracle, bad, spec.bounds(bad.n), got,
                          not dtype.startswith(("float", "bfloat")))


def _bad_summary(case: Case) -> str:
    values = case.values(case.index).reshape(-1)
    low, high = SPECS[case.op].bounds(case.n)
    where = np.flatnonzero((values < low) | (values >= high))
    if values.size > 8 and where.size:  # a large case: where the bad entries are
        at = int(where[0])
        text = (f"{case.index}[{at}]={int(values[at])} ({where.size} bad of {values.size} "
                f"entries{', stride 0' if case.index in case.expanded else ''}; n={case.n})")
    else:
        text = f"{case.index}={values[:8].tolist()}{'...' if values.size > 8 else ''} " \
               f"(n={case.n})"
    if "offsets" in case.arrays:
        text += f", offsets={case.values('offsets').tolist()}"
    return text


def _after(fn: Any, spec: OpSpec, case: Case, dtype: torch.dtype, index_dtype: str,
           layout: str, device: str) -> dict[str, Any]:
    """The valid twin of the case, run after the error: does the device still compute?"""
    try:
        res = run_valid(fn, spec, case, dtype, index_dtype, layout, device)
    except Exception as exc:
        return {"after": "raised", "after_detail": f"{type(exc).__name__}: {exc}"[:500]}
    problems = res["structure"] + res["values"] + res["guards"] + res["inputs"]
    if problems:
        return {"after": "wrong", "after_detail": "; ".join(problems)[:500]}
    return {"after": "correct", "after_detail": ""}
