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
    return _core._rope(a, dims, traditional, base if base is not None else 10000.0, scale,
                       offset, freqs, stream=stream)


def scaled_dot_product_attention(q, k, v, *, scale, mask=None, stream=None):
    return _core._scaled_dot_product_attention(q, k, v, scale, mask, stream=stream)
