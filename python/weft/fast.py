"""weft.fast: fused layer norm, RMS norm, RoPE and attention (mlx.core.fast)."""
from . import _core


def layer_norm(x, weight, bias, eps, *, stream=None):
    return _core._layer_norm(x, weight, bias, eps, stream=stream)


def rms_norm(x, weight, eps, *, stream=None):
    return _core._rms_norm(x, weight, eps, stream=stream)


def rope(a, dims, *, traditional, base, scale, offset, freqs=None, stream=None):
    if hasattr(offset, "item"):
        offset = int(offset.item())
    return _core._rope(a, dims, traditional, base if base is not None else 10000.0, scale,
                       offset, freqs, stream=stream)


def scaled_dot_product_attention(q, k, v, *, scale, mask=None, stream=None):
    return _core._scaled_dot_product_attention(q, k, v, scale, mask, stream=stream)
