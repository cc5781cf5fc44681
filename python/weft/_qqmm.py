"""mlx.core's qqmm: a matrix product whose two operands are both rounded to
a floating-point quantized format (nvfp4 or mxfp8) first: x on the fly,
w on the fly or given quantized (uint32 codes and scales, as mx.quantize
makes them). Built on mx.quantize / mx.dequantize / mx.quantized_matmul:
the products of the rounded values are summed in float32 (every rounded
value is exact in float32), so y is x_hat @ w_hat^T to float32 rounding.
"""
_DEFAULTS = {"nvfp4": (16, 4), "mxfp8": (32, 8)}


def _settings(mode, group_size, bits):
    if mode not in _DEFAULTS:
        raise ValueError(f"qqmm: mode '{mode}' is not supported (nvfp4 or mxfp8)")
    default_group, default_bits = _DEFAULTS[mode]
    return (default_group if group_size is None else group_size,
            default_bits if bits is None else bits)


def _rounded(a, group_size, bits, mode):
    """a as quantize then dequantize leave it, in float32."""
    import weft as mx

    matrix = a.reshape(1, -1) if a.ndim == 1 else a  # quantize takes matrices
    codes, scales = mx.quantize(matrix, group_size, bits, mode=mode)
    rounded = mx.dequantize(codes, scales, group_size=group_size, bits=bits, mode=mode,
                            dtype=mx.float32)
    return rounded.reshape(a.shape)


def qqmm(x, w, scales=None, group_size=None, bits=None, mode="nvfp4", global_scale_x=None,
         global_scale_w=None, *, stream=None):
    """x (..., K) @ w^T, w (N, K), both rounded to `mode` in groups of
    group_size along K: w as given when quantized (uint32 codes with their
    scales), else rounded here. Gradients (w given unquantized) are MLX's:
    dx = qqmm(cotangent, w^T), dw = qqmm(cotangent^T, x^T), each operand
    rounded along its own last axis. nvfp4's global scales are not
    supported (NotImplementedError)."""
    import weft as mx

    del stream  # one CPU stream: accepted for mlx.core's signature
    group_size, bits = _settings(mode, group_size, bits)
    if global_scale_x is not None or global_scale_w is not None:
        raise NotImplementedError("qqmm: weft's nvfp4 has no global scale")
    x = x if isinstance(x, mx.array) else mx.array(x)
    w = w if isinstance(w, mx.array) else mx.array(w)
    if not mx.issubdtype(x.dtype, mx.floating):
        raise ValueError(f"qqmm: x must be float32, float16 or bfloat16, not {x.dtype}")
    if scales is not None:
        if w.dtype != mx.uint32:
            raise ValueError("qqmm: with scales, w must be quantized (uint32 codes)")
        y = mx.quantized_matmul(_rounded(x, group_size, bits, mode), w, scales, None,
                                transpose=True, group_size=group_size, bits=bits, mode=mode)
        return y.astype(x.dtype)
    if not mx.issubdtype(w.dtype, mx.floating):
        raise ValueError("qqmm: an unquantized w must be floating point (or pass its scales)")
    return _product(group_size, bits, mode)(x, w).astype(x.dtype)


def _product(group_size, bits, mode):
    """x_hat @ w_hat^T with MLX's gradients, for one setting."""
    import weft as mx

    @mx.custom_function
    def product(x, w):
        return _rounded(x, group_size, bits, mode) @ mx.swapaxes(
            _rounded(w, group_size, bits, mode), -1, -2)

    @product.vjp
    def product(primals, cotangent, output):
        x, w = primals
        again = _product(group_size, bits, mode)
        dx = again(cotangent, mx.swapaxes(w, -1, -2))
        dw = again(mx.swapaxes(cotangent, -1, -2), mx.swapaxes(x, -1, -2))
        return dx.astype(x.dtype), dw.astype(w.dtype)

    return product
