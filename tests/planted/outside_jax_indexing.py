"""JAX as an outside indexing implementation (``--impl indexing.<op>=tests.planted.
outside_jax_indexing:<attr>``). JAX never raises for an out-of-bounds index: its gathers
clamp or fill with NaN (``mode``). The ``checked_*`` functions route out-of-range indices
to an error first (a host-side check, then JAX computes); ``silent_*`` keep JAX's own
behaviour, which the suite must flag, saying what came back."""

from __future__ import annotations

import numpy as np
import torch

Tensor = torch.Tensor


def _jnp():
    import jax

    jax.config.update("jax_enable_x64", True)  # int64 indices, float64 data as given
    import jax.numpy as jnp

    return jnp


def _to_jax(t: Tensor):
    jnp = _jnp()
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: exact through float32
        return jnp.asarray(t.float().numpy(), dtype=jnp.bfloat16)
    return jnp.asarray(t.numpy())


def _to_torch(a, like: Tensor) -> Tensor:
    arr = np.asarray(a.astype("float32") if str(a.dtype) == "bfloat16" else a)
    return torch.from_numpy(arr.copy()).to(dtype=like.dtype, device=like.device)


def _check(index: Tensor, low: int, n: int, dim: int) -> None:
    flat = index.detach().cpu().reshape(-1)
    bad = flat[(flat < low) | (flat >= n)]
    if bad.numel():
        raise IndexError(f"index {int(bad[0])} is out of bounds for dimension {dim} with "
                         f"size {n}")


def checked_index_select(x: Tensor, dim: int, index: Tensor) -> Tensor:
    _check(index, 0, x.shape[dim], dim)
    jnp = _jnp()
    return _to_torch(jnp.take(_to_jax(x), _to_jax(index), axis=dim), x)


def checked_gather(x: Tensor, dim: int, index: Tensor) -> Tensor:
    _check(index, 0, x.shape[dim], dim)
    jnp = _jnp()
    # torch.gather reads index.shape of x (smaller on the other dims): slice x to it first
    xs = _to_jax(x)[tuple(slice(0, s) if d != dim % x.dim() else slice(None)
                          for d, s in enumerate(index.shape))] if x.dim() else _to_jax(x)
    return _to_torch(jnp.take_along_axis(xs, _to_jax(index), axis=dim), x)


def checked_take(x: Tensor, index: Tensor) -> Tensor:
    n = x.numel()
    _check(index, -n, n, 0)
    jnp = _jnp()
    out = jnp.take(_to_jax(x).reshape(-1), _to_jax(index) % max(n, 1))
    return _to_torch(out, x).reshape(index.shape)  # JAX drops the dims of an empty index


def checked_take_along_dim(input: Tensor, indices: Tensor, dim: int) -> Tensor:
    n = input.shape[dim]
    _check(indices, -n, n, dim)
    jnp = _jnp()
    return _to_torch(jnp.take_along_axis(_to_jax(input), _to_jax(indices) % max(n, 1),
                                         axis=dim), input)


def checked_embedding(input: Tensor, weight: Tensor, *args, **kwargs) -> Tensor:
    _check(input, 0, weight.shape[0], 0)
    jnp = _jnp()
    out = _to_torch(jnp.take(_to_jax(weight), _to_jax(input), axis=0), weight)
    return out.reshape(*input.shape, weight.shape[1])  # (JAX drops an empty index's dims)


def silent_index_select(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """JAX's default: an out-of-bounds index gives NaN (mode="fill")."""
    jnp = _jnp()
    return _to_torch(jnp.take(_to_jax(x), _to_jax(index), axis=dim), x)


def silent_embedding(input: Tensor, weight: Tensor, *args, **kwargs) -> Tensor:
    """jnp.take(mode="clip"): an out-of-bounds index reads the nearest row."""
    jnp = _jnp()
    return _to_torch(jnp.take(_to_jax(weight), _to_jax(input), axis=0, mode="clip"), weight)


CHECKED = [("index_select", "checked_index_select"), ("gather", "checked_gather"),
           ("take", "checked_take"), ("take_along_dim", "checked_take_along_dim"),
           ("embedding", "checked_embedding")]
SILENT = [("index_select", "silent_index_select", "NaN"),
          ("embedding", "silent_embedding", "clamped into [0, n)")]
