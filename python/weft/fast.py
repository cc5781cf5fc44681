"""weft.fast: fused layer norm, RMS norm, RoPE and attention (mlx.core.fast)."""
from . import _core


def layer_norm(x, weight, bias, eps, *, stream=None):
    return _core._layer_norm(x, weight, bias, eps, stream=stream)


def rms_norm(x, weight, eps, *, stream=None):
    return _core._rms_norm(x, weight, eps, stream=stream)


def rope(a, dims, *, traditional, base, scale, offset, freqs=None, stream=None):
    if hasattr(offset, "item") and offset.size != 1:
        # one offset per batch entry (axis 0); each entry is rotated alone
        if offset.ndim != 1 or offset.shape[0] != a.shape[0]:
            raise ValueError(f"rope: offsets of shape {offset.shape} do not match the batch "
                             f"of an input of shape {a.shape}")
        rows = [rope(a[i:i + 1], dims, traditional=traditional, base=base, scale=scale,
                     offset=int(o), freqs=freqs, stream=stream)
                for i, o in enumerate(offset.tolist())]
        return _core.concatenate(rows, 0)
    if hasattr(offset, "item"):
        offset = int(offset.item())
    if freqs is not None:
        return _rope_with_freqs(a, dims, traditional, scale, offset, freqs)
    return _core._rope(a, dims, traditional, base if base is not None else 10000.0, scale,
                       offset, stream=stream)


def _rope_with_freqs(a, dims, traditional, scale, offset, freqs):
    """RoPE whose pair i turns by position * scale / freqs[i] (MLX's meaning of
    `freqs`), composed from weft ops in float32 and cast back to a's dtype."""
    freqs = freqs if isinstance(freqs, _core.array) else _core.array(freqs)
    if freqs.ndim != 1 or freqs.shape[0] != dims // 2:
        raise ValueError(f"rope: freqs must have shape ({dims // 2},) for dims={dims}, "
                         f"got {freqs.shape}")
    if dims % 2 != 0 or dims > a.shape[-1] or a.ndim < 2:
        raise ValueError(f"rope: dims={dims} must be even and at most the last axis of an "
                         f"input of shape {a.shape} (rank 2 or more)")
    n = a.shape[-2]
    positions = _core.multiply(_core.arange(offset, offset + n, 1, dtype=_core.float32), scale)
    theta = _core.multiply(_core.reshape(positions, [n, 1]),
                           _core.reciprocal(freqs.astype(_core.float32)))
    cos, sin = _core.cos(theta), _core.sin(theta)
    x = a.astype(_core.float32)
    if traditional:
        x1, x2 = x[..., 0:dims:2], x[..., 1:dims:2]
    else:
        x1, x2 = x[..., :dims // 2], x[..., dims // 2:dims]
    r1 = _core.subtract(_core.multiply(x1, cos), _core.multiply(x2, sin))
    r2 = _core.add(_core.multiply(x1, sin), _core.multiply(x2, cos))
    if traditional:  # pairs back in place: (r1[0], r2[0], r1[1], r2[1], ...)
        rotated = _core.reshape(_core.stack([r1, r2], -1), [*x.shape[:-1], dims])
    else:
        rotated = _core.concatenate([r1, r2], -1)
    if dims < a.shape[-1]:
        rotated = _core.concatenate([rotated, x[..., dims:]], -1)
    return rotated.astype(a.dtype)


def scaled_dot_product_attention(q, k, v, *, scale, mask=None, sinks=None, stream=None):
    if sinks is None:
        return _core._scaled_dot_product_attention(q, k, v, scale, mask, stream=stream)
    return _attention_with_sinks(q, k, v, scale, mask, sinks)


def _attention_with_sinks(q, k, v, scale, mask, sinks):
    """Attention whose softmax also sees one learned logit per head (the
    sink), composed from weft ops: scores, the sink as an extra first column,
    softmax, the column dropped, then the values."""
    if not isinstance(sinks, _core.array) or sinks.ndim != 1 or sinks.shape[0] != q.shape[1]:
        raise ValueError(f"scaled_dot_product_attention: sinks must have shape ({q.shape[1]},) "
                         "(one per query head)")
    if sinks.dtype != q.dtype:
        raise ValueError(f"scaled_dot_product_attention: sinks have dtype {sinks.dtype}, the "
                         f"queries {q.dtype}")
    heads, kv_heads = q.shape[1], k.shape[1]
    if heads % kv_heads != 0:
        raise ValueError("scaled_dot_product_attention: query heads must be a multiple of "
                         "key/value heads")
    if heads != kv_heads:
        k = _core.repeat(k, heads // kv_heads, 1)
        v = _core.repeat(v, heads // kv_heads, 1)
    scores = _core.matmul(_core.multiply(q, scale), _core.swapaxes(k, -1, -2))
    scores = scores.astype(_core.float32)
    t_q, t_kv = q.shape[-2], k.shape[-2]
    if isinstance(mask, str):
        if mask != "causal":
            raise ValueError(f"scaled_dot_product_attention: unknown mask '{mask}'")
        rows = _core.reshape(_core.arange(0, t_q, 1, dtype=_core.int32), [t_q, 1])
        cols = _core.reshape(_core.arange(0, t_kv, 1, dtype=_core.int32), [1, t_kv])
        mask = _core.less_equal(cols, _core.add(rows, t_kv - t_q))
    if mask is not None:
        if mask.dtype == _core.bool_:
            scores = _core.where(mask, scores, -float("inf"))
        else:
            scores = _core.add(scores, mask.astype(_core.float32))
    sink = _core.reshape(sinks.astype(_core.float32), [1, heads, 1, 1])
    sink = _core.broadcast_to(sink, list(scores.shape[:-1]) + [1])
    weights = _core.softmax(_core.concatenate([sink, scores], -1), -1)[..., 1:]
    return _core.matmul(weights.astype(q.dtype), v)
