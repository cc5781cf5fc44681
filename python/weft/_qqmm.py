"""mlx.core's qqmm: a matrix product whose two operands are both rounded to
a floating-point quantized format (nvfp4 or mxfp8) first: x on the fly,
w on the fly or given quantized (uint32 codes and scales, as mx.quantize
makes them). Built on mx.quantize / mx.dequantize / mx.quantized_matmul:
the products of the rounded values are summed in float32 (every rounded
value is exact in float32), so y is x_hat @ w_hat^T to float32 rounding.

Also nvfp4's tensor scale (MLX's global_scale, for quantize, dequantize
and qqmm): a float32 array of one element g. The values are quantized as
w * (448 * 6 / g), so that a tensor whose largest |w| is g gives its
largest group the largest e4m3 scale (448), and dequantizing divides by
the same factor (in float32, rounded once to the result's dtype).
"""
from . import _core

_DEFAULTS = {"nvfp4": (16, 4), "mxfp8": (32, 8)}


def _settings(mode, group_size, bits):
    if mode not in _DEFAULTS:
        raise ValueError(f"qqmm: mode '{mode}' is not supported (nvfp4 or mxfp8)")
    default_group, default_bits = _DEFAULTS[mode]
    return (default_group if group_size is None else group_size,
            default_bits if bits is None else bits)


def _tensor_scale_factor(fname, mode, global_scale):
    """448 * 6 / global_scale, a float32 array of one element, after MLX's
    checks."""
    import weft as mx

    if mode != "nvfp4":
        raise ValueError(f"[{fname}] global_scale is only used with mode 'nvfp4', not '{mode}'")
    g = global_scale if isinstance(global_scale, mx.array) else mx.array(global_scale)
    if g.size != 1:
        raise ValueError(f"[{fname}] global_scale must have one element, not shape {g.shape}")
    if g.dtype != mx.float32:
        raise ValueError(f"[{fname}] global_scale must be float32, not {g.dtype}")
    return mx.divide(mx.array(448.0 * 6.0, mx.float32), g.reshape(()))


def quantize(w, /, group_size=None, bits=None, mode="affine", *, global_scale=None,
             stream=None):
    """mlx.core.quantize: (codes, scales[, biases]) of w in groups along its
    last axis; nvfp4 may take a tensor scale (global_scale)."""
    import weft as mx

    if global_scale is None:
        return _core.quantize(w, group_size, bits, mode, stream=stream)
    factor = _tensor_scale_factor("quantize", mode, global_scale)
    w = w if isinstance(w, mx.array) else mx.array(w)
    if not mx.issubdtype(w.dtype, mx.floating):
        raise ValueError(f"[quantize] w must be floating point, not {w.dtype}")
    return _core.quantize(mx.multiply(w.astype(mx.float32), factor), group_size, bits, mode,
                          stream=stream)


def dequantize(w, /, scales, biases=None, group_size=None, bits=None, mode="affine",
               global_scale=None, dtype=None, *, stream=None):
    """mlx.core.dequantize: the values that codes and scales (and biases)
    stand for, in dtype (default: the scales' dtype for affine, bfloat16
    for the floating-point modes); nvfp4 may take a tensor scale
    (global_scale)."""
    import weft as mx

    if global_scale is None:
        return _core.dequantize(w, scales, biases, group_size, bits, mode, dtype=dtype,
                                stream=stream)
    factor = _tensor_scale_factor("dequantize", mode, global_scale)
    values = _core.dequantize(w, scales, biases, group_size, bits, mode, dtype=mx.float32,
                              stream=stream)
    return mx.divide(values, factor).astype(mx.bfloat16 if dtype is None else dtype)


def _rounded(a, group_size, bits, mode, global_scale=None):
    """a as quantize then dequantize leave it, in float32."""
    import weft as mx

    matrix = a.reshape(1, -1) if a.ndim == 1 else a  # quantize takes matrices
    codes, scales = quantize(matrix, group_size, bits, mode=mode, global_scale=global_scale)
    rounded = dequantize(codes, scales, group_size=group_size, bits=bits, mode=mode,
                         global_scale=global_scale, dtype=mx.float32)
    return rounded.reshape(a.shape)


def qqmm(x, w, scales=None, group_size=None, bits=None, mode="nvfp4", global_scale_x=None,
         global_scale_w=None, *, stream=None):
    """x (..., K) @ w^T, w (N, K), both rounded to `mode` in groups of
    group_size along K: w as given when quantized (uint32 codes with their
    scales), else rounded here. Gradients (w given unquantized) are MLX's:
    dx = qqmm(cotangent, w^T), dw = qqmm(cotangent^T, x^T), each operand
    rounded along its own last axis. nvfp4 takes tensor scales for both
    operands or for neither (global_scale_x, global_scale_w)."""
    import weft as mx

    del stream  # one CPU stream: accepted for mlx.core's signature
    group_size, bits = _settings(mode, group_size, bits)
    if (global_scale_x is None) != (global_scale_w is None):
        raise ValueError("qqmm: give both global_scale_x and global_scale_w, or neither")
    if global_scale_x is not None:
        for g in (global_scale_x, global_scale_w):
            _tensor_scale_factor("qqmm", mode, g)
    x = x if isinstance(x, mx.array) else mx.array(x)
    w = w if isinstance(w, mx.array) else mx.array(w)
    if not mx.issubdtype(x.dtype, mx.floating):
        raise ValueError(f"qqmm: x must be float32, float16 or bfloat16, not {x.dtype}")
    if scales is not None:
        if w.dtype != mx.uint32:
            raise ValueError("qqmm: with scales, w must be quantized (uint32 codes)")
        y = mx.quantized_matmul(_rounded(x, group_size, bits, mode, global_scale_x), w, scales,
                                None, transpose=True, group_size=group_size, bits=bits, mode=mode)
        if global_scale_w is not None:  # w's values are its codes' over the factor
            y = mx.divide(y, _tensor_scale_factor("qqmm", mode, global_scale_w))
        return y.astype(x.dtype)
    if not mx.issubdtype(w.dtype, mx.floating):
        raise ValueError("qqmm: an unquantized w must be floating point (or pass its scales)")
    return _product(group_size, bits, mode, global_scale_x, global_scale_w)(x, w).astype(x.dtype)


def _product(group_size, bits, mode, global_scale_x=None, global_scale_w=None):
    """x_hat @ w_hat^T with MLX's gradients, for one setting. A backward
    product rounds the cotangent without a tensor scale, the other operand
    with its own."""
    import weft as mx

    @mx.custom_function
    def product(x, w):
        return _rounded(x, group_size, bits, mode, global_scale_x) @ mx.swapaxes(
            _rounded(w, group_size, bits, mode, global_scale_w), -1, -2)

    @product.vjp
    def product(primals, cotangent, output):
        x, w = primals
        dx = _product(group_size, bits, mode, None, global_scale_w)(
            cotangent, mx.swapaxes(w, -1, -2))
        dw = _product(group_size, bits, mode, None, global_scale_x)(
            mx.swapaxes(cotangent, -1, -2), mx.swapaxes(x, -1, -2))
        return dx.astype(x.dtype), dw.astype(w.dtype)

    return product
