"""weft.fft: discrete Fourier transforms (mlx.core.fft's API).

Every transform is one call of weft.h's wf_fft (weft._core._fft); this
module gives the defaults of n / s / axes and the norm names as MLX does.
Inputs of real, integer or bool dtype become complex64 (float32 for the
real forward transforms; a complex input to those keeps its real part).
"""
from . import _core
from ._array import array as _array
from ._composed import roll as _roll

_FORWARD, _INVERSE, _REAL_FORWARD, _REAL_INVERSE = 0, 1, 2, 3
_NORMS = {"backward": 0, "ortho": 1, "forward": 2}

__all__ = [
    "fft", "ifft", "fft2", "ifft2", "fftn", "ifftn",
    "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
    "fftshift", "ifftshift", "fftfreq", "rfftfreq",
]


def _as_array(a):
    return a if isinstance(a, _array) else _array(a)


def _norm_code(norm):
    if norm is None:
        return _NORMS["backward"]
    code = _NORMS.get(norm) if isinstance(norm, str) else None
    if code is None:
        raise ValueError(
            f'[fft] Invalid norm "{norm}": expected "backward", "ortho" or "forward".')
    return code


def _one_axis(a, n, axis, kind, norm, stream):
    sizes = None if n is None else [n]
    return _core._fft(a, [axis], sizes, kind, _norm_code(norm), stream=stream)


def _many_axes(name, a, s, axes, kind, norm, stream):
    a = _as_array(a)
    if axes is None:
        if s is not None:  # MLX (and NumPy 2) refuse to guess them
            raise ValueError(f"[{name}] `axes` should not be `None` if `s` is not `None`.")
        axes = list(range(a.ndim))
    axes = [int(ax) for ax in axes]
    s = None if s is None else [int(v) for v in s]
    if s is not None and len(s) != len(axes):
        raise ValueError(
            f"[{name}] Shape s ({len(s)} entries) and axes ({len(axes)}) must have the same "
            "length.")
    if a.ndim == 0:
        raise ValueError(f"[{name}] Requires an array with at least one dimension.")
    if not axes:
        return a  # nothing to transform: MLX returns the input as is
    return _core._fft(a, axes, s, kind, _norm_code(norm), stream=stream)


def fft(a, n=None, axis=-1, norm="backward", stream=None):
    """One dimensional discrete Fourier Transform along axis (n: the
    length the axis is truncated or zero-padded to)."""
    return _one_axis(a, n, axis, _FORWARD, norm, stream)


def ifft(a, n=None, axis=-1, norm="backward", stream=None):
    """The inverse of fft."""
    return _one_axis(a, n, axis, _INVERSE, norm, stream)


def rfft(a, n=None, axis=-1, norm="backward", stream=None):
    """fft of a real input: n // 2 + 1 outputs along axis."""
    return _one_axis(a, n, axis, _REAL_FORWARD, norm, stream)


def irfft(a, n=None, axis=-1, norm="backward", stream=None):
    """The inverse of rfft: n real outputs along axis (default
    2 * (a.shape[axis] - 1)); the input is cut or padded to n // 2 + 1."""
    return _one_axis(a, n, axis, _REAL_INVERSE, norm, stream)


def fftn(a, s=None, axes=None, norm="backward", stream=None):
    """n-dimensional fft over axes (default: all of them; s needs axes)."""
    return _many_axes("fftn", a, s, axes, _FORWARD, norm, stream)


def ifftn(a, s=None, axes=None, norm="backward", stream=None):
    """The inverse of fftn."""
    return _many_axes("ifftn", a, s, axes, _INVERSE, norm, stream)


def rfftn(a, s=None, axes=None, norm="backward", stream=None):
    """n-dimensional fft of a real input; the last of axes keeps
    s[-1] // 2 + 1 outputs."""
    return _many_axes("rfftn", a, s, axes, _REAL_FORWARD, norm, stream)


def irfftn(a, s=None, axes=None, norm="backward", stream=None):
    """The inverse of rfftn: the last of axes is the real one."""
    return _many_axes("irfftn", a, s, axes, _REAL_INVERSE, norm, stream)


def fft2(a, s=None, axes=(-2, -1), norm="backward", stream=None):
    """fftn over two axes (default the last two)."""
    return _many_axes("fft2", a, s, axes, _FORWARD, norm, stream)


def ifft2(a, s=None, axes=(-2, -1), norm="backward", stream=None):
    """The inverse of fft2."""
    return _many_axes("ifft2", a, s, axes, _INVERSE, norm, stream)


def rfft2(a, s=None, axes=(-2, -1), norm="backward", stream=None):
    """rfftn over two axes (default the last two)."""
    return _many_axes("rfft2", a, s, axes, _REAL_FORWARD, norm, stream)


def irfft2(a, s=None, axes=(-2, -1), norm="backward", stream=None):
    """The inverse of rfft2."""
    return _many_axes("irfft2", a, s, axes, _REAL_INVERSE, norm, stream)


def _shift(a, axes, sign, stream):
    a = _as_array(a)
    if axes is None:
        axes = list(range(a.ndim))
    elif isinstance(axes, int):
        axes = [axes]
    axes = list(axes)
    for ax in axes:
        if not -a.ndim <= ax < a.ndim:
            raise ValueError(f"[fftshift] Axis {ax} is out of range for rank {a.ndim}.")
    if not axes or a.size == 0:
        return a
    shifts = [sign * (a.shape[ax] // 2) for ax in axes]
    return _roll(a, shifts, axes, stream=stream)


def fftshift(a, axes=None, stream=None):
    """The zero frequency moved to the middle of axes (default: all)."""
    return _shift(a, axes, 1, stream)


def ifftshift(a, axes=None, stream=None):
    """The inverse of fftshift (they differ on odd lengths)."""
    return _shift(a, axes, -1, stream)


def _frequencies(n, d, name, real, stream):
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ValueError(f"[{name}] n must be a positive integer, got {n}.")
    d = float(d)  # a TypeError for anything that is not a real number
    if d == 0:
        raise ValueError(f"[{name}] d must not be zero.")
    # The indices as weft arrays (a Python list of them took 100 bytes a
    # frequency, outside weft's memory limit), in double, scaled in double and
    # rounded once to float32: NumPy's values exactly.
    if real:
        k = _core.arange(0, n // 2 + 1, 1, dtype=_core.float64)
    else:
        k = _core.concatenate([_core.arange(0, (n - 1) // 2 + 1, 1, dtype=_core.float64),
                               _core.arange(-(n // 2), 0, 1, dtype=_core.float64)], 0)
    return _core.multiply(k, 1.0 / (n * d)).astype(_core.float32, stream=stream)


def fftfreq(n, d=1.0, stream=None):
    """The sample frequencies of fft's outputs for n samples spaced d:
    [0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (n * d), float32."""
    return _frequencies(n, d, "fftfreq", False, stream)


def rfftfreq(n, d=1.0, stream=None):
    """The sample frequencies of rfft's outputs: [0, ..., n // 2] / (n * d)."""
    return _frequencies(n, d, "rfftfreq", True, stream)
