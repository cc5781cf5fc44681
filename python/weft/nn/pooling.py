"""Pooling and upsampling over channels-last inputs (N, spatial..., C), as mlx.nn.

Pooling reduces over one strided slice of the (padded) input per kernel
offset: each slice is an ordinary view, so gradients come from slicing's own
rule.
"""
import itertools
import math

import weft as mx

from .module import Module


def _tuple(value, n, name):
    if isinstance(value, int):
        return (value,) * n
    value = tuple(value)
    if len(value) != n:
        raise ValueError(f"{name} must be an int or a tuple of {n} ints, got {value}")
    return value


class _Pool(Module):
    def __init__(self, spatial_dims, kernel_size, stride, padding, padding_value):
        super().__init__()
        self._kernel = _tuple(kernel_size, spatial_dims, "kernel_size")
        self._stride = _tuple(stride if stride is not None else kernel_size, spatial_dims, "stride")
        self._padding = _tuple(padding, spatial_dims, "padding")
        if any(k <= 0 for k in self._kernel) or any(s <= 0 for s in self._stride):
            raise ValueError("kernel_size and stride must be positive")
        if any(p < 0 for p in self._padding):
            raise ValueError(f"padding must be non-negative, got {self._padding}")
        self._padding_value = padding_value

    def _extra_repr(self):
        return f"kernel_size={self._kernel}, stride={self._stride}, padding={self._padding}"

    def _windows(self, x):
        """The strided slices, one per kernel offset, and their count."""
        n = len(self._kernel)
        if x.ndim != n + 2:
            raise ValueError(f"{type(self).__name__} expects inputs of {n + 2} dimensions "
                             f"(N, spatial..., C), got shape {x.shape}")
        if any(self._padding):
            widths = [(0, 0)] + [(p, p) for p in self._padding] + [(0, 0)]
            x = mx.pad(x, widths, constant_values=self._padding_value)
        sizes = x.shape[1:-1]
        outs = [(size - k) // s + 1 for size, k, s in zip(sizes, self._kernel, self._stride)]
        if any(o <= 0 for o in outs):
            raise ValueError(f"the kernel {self._kernel} is larger than the padded input {sizes}")
        slices = []
        for offset in itertools.product(*(range(k) for k in self._kernel)):
            index = (slice(None),) + tuple(
                slice(o, o + (out - 1) * s + 1, s) for o, out, s in zip(offset, outs, self._stride))
            slices.append(x[index])
        return slices


class _MaxPool(_Pool):
    def __init__(self, spatial_dims, kernel_size, stride=None, padding=0):
        super().__init__(spatial_dims, kernel_size, stride, padding, -math.inf)

    def __call__(self, x):
        # one max reduction: tied maxima share the gradient equally, as MLX's
        return mx.max(mx.stack(self._windows(x), axis=-1), axis=-1)


class _AvgPool(_Pool):
    def __init__(self, spatial_dims, kernel_size, stride=None, padding=0):
        super().__init__(spatial_dims, kernel_size, stride, padding, 0)

    def __call__(self, x):
        windows = self._windows(x)
        out = windows[0]
        for w in windows[1:]:
            out = out + w
        return out / len(windows)


def _pool_class(name, base, dims):
    def __init__(self, kernel_size, stride=None, padding=0):
        base.__init__(self, dims, kernel_size, stride, padding)

    doc = f"{'Max' if base is _MaxPool else 'Average'} pooling over {dims} spatial axes."
    return type(name, (base,), {"__init__": __init__, "__doc__": doc})


MaxPool1d = _pool_class("MaxPool1d", _MaxPool, 1)
MaxPool2d = _pool_class("MaxPool2d", _MaxPool, 2)
MaxPool3d = _pool_class("MaxPool3d", _MaxPool, 3)
AvgPool1d = _pool_class("AvgPool1d", _AvgPool, 1)
AvgPool2d = _pool_class("AvgPool2d", _AvgPool, 2)
AvgPool3d = _pool_class("AvgPool3d", _AvgPool, 3)


# ---------------------------------------------------------------- upsampling


def _source_positions(in_size, out_size, scale, align_corners):
    """Where each output index samples the input, as PyTorch's interpolate."""
    i = mx.arange(out_size, dtype=mx.float32)
    if align_corners:
        step = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
        return i * step
    return (i + 0.5) / scale - 0.5


def _gather_axis(x, index, axis):
    return mx.take(x, index.astype(mx.int32), axis=axis)


def _weights_shape(ndim, axis, n):
    shape = [1] * ndim
    shape[axis] = n
    return shape


def _nearest_axis(x, axis, scale, out_size, align_corners):
    in_size = x.shape[axis]
    index = mx.floor(mx.arange(out_size, dtype=mx.float32) / scale)
    return _gather_axis(x, mx.minimum(index, in_size - 1), axis)


def _linear_axis(x, axis, scale, out_size, align_corners):
    in_size = x.shape[axis]
    src = mx.maximum(_source_positions(in_size, out_size, scale, align_corners), 0.0)
    low = mx.minimum(mx.floor(src), in_size - 1)
    high = mx.minimum(low + 1, in_size - 1)
    w = (src - low).reshape(_weights_shape(x.ndim, axis, out_size)).astype(x.dtype)
    return _gather_axis(x, low, axis) * (1 - w) + _gather_axis(x, high, axis) * w


def _cubic_weight(d, a=-0.75):
    """Keys' cubic convolution kernel at distance d (PyTorch's a = -0.75)."""
    d = mx.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return mx.where(d <= 1, near, mx.where(d < 2, far, 0.0))


def _cubic_axis(x, axis, scale, out_size, align_corners):
    in_size = x.shape[axis]
    src = _source_positions(in_size, out_size, scale, align_corners)
    base = mx.floor(src)
    t = src - base
    out = None
    for k in (-1, 0, 1, 2):
        index = mx.clip(base + k, 0, in_size - 1)
        w = _cubic_weight(t - k).reshape(_weights_shape(x.ndim, axis, out_size)).astype(x.dtype)
        term = _gather_axis(x, index, axis) * w
        out = term if out is None else out + term
    return out


def _antialias_filter(mode):
    if mode == "linear":
        return 2, lambda d: max(0.0, 1.0 - abs(d))

    def keys_cubic(d, a=-0.5):  # PyTorch's antialiased bicubic uses a = -0.5
        d = abs(d)
        if d < 1:
            return ((a + 2) * d - (a + 3)) * d * d + 1
        if d < 2:
            return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
        return 0.0
    return 4, keys_cubic


def _antialias_axis(x, axis, scale, out_size, mode):
    """Resampling as PyTorch's interpolate(antialias=True): each output is a
    normalised filter over the inputs it covers, the filter widened by the
    downsampling ratio. Applied as a (out, in) weight matrix."""
    in_size = x.shape[axis]
    ratio = 1.0 / scale
    taps, kernel = _antialias_filter(mode)
    support = taps * 0.5 * ratio if ratio >= 1.0 else taps * 0.5
    inverse = 1.0 / ratio if ratio >= 1.0 else 1.0
    rows = []
    for i in range(out_size):
        center = ratio * (i + 0.5)
        first = max(int(center - support + 0.5), 0)
        last = min(int(center + support + 0.5), in_size)
        weights = [kernel((j - center + 0.5) * inverse) for j in range(first, last)]
        total = sum(weights)
        row = [0.0] * in_size
        for j, w in zip(range(first, last), weights):
            row[j] = w / total if total != 0 else w
        rows.append(row)
    matrix = mx.array(rows, dtype=x.dtype)
    moved = mx.moveaxis(x, axis, -1)
    return mx.moveaxis(moved @ matrix.T, -1, axis)


class Upsample(Module):
    """Scales the spatial axes of (N, spatial..., C) inputs by scale_factor
    (a number, or one per axis) with mode 'nearest', 'linear' or 'cubic';
    the output size is floor(size * scale). Same sampling as PyTorch's
    interpolate with scale factors. antialias (linear and cubic, without
    align_corners): PyTorch's antialiased filters."""

    _MODES = {"nearest": _nearest_axis, "linear": _linear_axis, "cubic": _cubic_axis}

    def __init__(self, scale_factor, mode="nearest", align_corners=False, antialias=False):
        super().__init__()
        if mode not in self._MODES:
            raise ValueError(f"[Upsample] Got unsupported upsampling algorithm: {mode}")
        if antialias and align_corners:
            raise ValueError("[Upsample] antialias=True with align_corners=True is not supported")
        self.antialias = bool(antialias) and mode != "nearest"
        self.scale_factor = tuple(float(s) for s in scale_factor) \
            if isinstance(scale_factor, (list, tuple)) else float(scale_factor)
        self.mode = mode
        self.align_corners = align_corners

    def _extra_repr(self):
        return f"scale_factor={self.scale_factor}, mode={self.mode!r}, align_corners={self.align_corners}"

    def __call__(self, x):
        spatial = x.ndim - 2
        if spatial <= 0:
            raise ValueError(f"[Upsample] The input should have at least 1 spatial dimension, "
                             f"got shape {x.shape}")
        scales = self.scale_factor
        if isinstance(scales, tuple):
            if len(scales) != spatial:
                raise ValueError(f"[Upsample] One scale per spatial dimension is required: "
                                 f"{len(scales)} scales for {spatial} dimensions")
        else:
            scales = (scales,) * spatial
        resample = self._MODES[self.mode]
        if self.mode != "nearest" and not mx.issubdtype(x.dtype, mx.floating):
            x = x.astype(mx.float32)
        for axis, scale in zip(range(1, x.ndim - 1), scales):
            out_size = int(math.floor(x.shape[axis] * scale))
            if self.antialias:
                x = _antialias_axis(x, axis, float(scale), out_size, self.mode)
            else:
                x = resample(x, axis, float(scale), out_size, self.align_corners)
        return x


def upsample_nearest(x, scale_factor):
    return Upsample(scale_factor, "nearest")(x)


def upsample_linear(x, scale_factor, align_corners=False):
    return Upsample(scale_factor, "linear", align_corners)(x)


def upsample_cubic(x, scale_factor, align_corners=False):
    return Upsample(scale_factor, "cubic", align_corners)(x)
